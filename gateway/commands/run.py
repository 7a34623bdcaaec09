"""``loopgate run "prompt"``: one turn of a loop, printed readably or as NDJSON.

The loop is the one the flags name, exactly as ``loopgate serve`` would run it (the reference
loop with its model and tools, or ``--loop``, ``--loop-url``, ``--loop-cmd``), on an in-process
hub with a memory journal: the printed events are the run's, as any front end would see them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc

from ...adapters.native.projector import NativeProjector
from ...adapters.shared.follow import RESUMING, EventStream
from ...contracts.envelope import Envelope, encode_envelope
from ...contracts.gateway_events import PERMISSION_REQUEST
from ...contracts.history import continued, conversation_after
from ...contracts.messages import ToolCall
from ...contracts.ports import StartRun
from ...contracts.projector import ProjectorContext
from ..hub import Hub
from ..reference.config import LoopConfig
from ..settings import Settings, load_settings
from .flags import LOOP_SETTINGS, add_loop_flags
from .startup import StartupError, command_hub, run_async
from .terminal import (
    MAX_ANSWERS,
    ApprovalPolicy,
    Terminal,
    TerminalApprovals,
    ToolSpinner,
    asked_question,
    clip,
    question_prompt,
)

EXIT_CODES = {"completed": 0, "waiting_user": 0, "cancelled": 130}
DIM, RESET = "\x1b[2m", "\x1b[0m"
SETTING_FLAGS = (*LOOP_SETTINGS, "workspace")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run one turn of a loop and print its events",
        description="Run one turn of the reference loop (or the loop --loop, --loop-url or "
        "--loop-cmd names) in-process. On a terminal, a tool that needs approval is asked "
        "about (y/N/a), a question from the model (ask_user) is answered and the run goes on, "
        "and a tool call running over a second shows a spinner on stderr. The loop, model and "
        "tool flags also read LOOPGATE_<NAME> (e.g. LOOPGATE_OPENAI_MODEL); flags win. Exit "
        "code: 0 completed (or waiting for the user), 1 failed or out of budget, 2 a usage "
        "error, 130 cancelled (Ctrl-C).",
    )
    parser.add_argument("prompt", help="the user message; - reads it from standard input")
    parser.add_argument(
        "--json", action="store_true", help="print one event envelope per line (NDJSON)"
    )
    parser.add_argument(
        "--run-id", help="the run's id (default: a new one, run_ and 32 hex digits)"
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="JSON|KEY=VALUE",
        help="loop config as a JSON object or key=value (repeatable; values parsed as JSON)",
    )
    add_loop_flags(parser)
    parser.add_argument(
        "--workspace",
        help="the directory the file tools read and write_note writes under (LOOPGATE_WORKSPACE; "
        "default: ~/.local/share/loopgate/workspace)",
    )
    parser.add_argument("--max-rounds", type=int, help="shorthand for --config max_rounds=N")
    approval = parser.add_mutually_exclusive_group()
    approval.add_argument(
        "--yes",
        action="store_true",
        help="approve every tool call that needs approval (write_note) without asking",
    )
    approval.add_argument(
        "--no",
        action="store_true",
        help="refuse every tool call that needs approval without asking (default: ask on the "
        "terminal; refuse when there is none)",
    )
    parser.set_defaults(func=run_command)


def config_items(items: list[str], max_rounds: int | None) -> dict[str, Any]:
    """The loop config ``--config`` and ``--max-rounds`` give, merged in order."""
    merged: dict[str, Any] = {}
    for item in items:
        text = item.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--config is not valid JSON: {exc.msg}") from None
            if not isinstance(value, dict):
                raise ValueError("--config JSON must be an object")
            merged.update(value)
            continue
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config expects KEY=VALUE or a JSON object, got {item!r}")
        try:
            merged[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            merged[key.strip()] = raw
    if max_rounds is not None:
        merged["max_rounds"] = max_rounds
    return merged


def parse_config(items: list[str], max_rounds: int | None) -> LoopConfig:
    """The reference loop's config from ``--config`` and ``--max-rounds``."""
    return LoopConfig.from_dict(config_items(items, max_rounds))


class _Printer:
    """Where a run's events go; notes when its reader went away (``| head``)."""

    status: str | None = None
    completion: dict[str, Any] | None = None  # the last turn's terminal completion
    broken = False

    async def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.show(kind, data)

    def show(self, kind: str, data: dict[str, Any], env: Envelope | None = None) -> None:
        if kind == "completion" and data.get("status") != "executing":
            self.status = data.get("status")
            self.completion = data
        if self.broken:
            return
        try:
            self.write(kind, data, env)
        except BrokenPipeError:
            self.broken = True

    def write(self, kind: str, data: dict[str, Any], env: Envelope | None) -> None:
        raise NotImplementedError


class NdjsonPrinter(_Printer):
    """One JSON line per envelope: the hub's, or one made here (gapless seq from 1)."""

    def __init__(self, run_id: str, out: IO[bytes]) -> None:
        self.run_id = run_id
        self.out = out
        self.seq = 0

    def write(self, kind: str, data: dict[str, Any], env: Envelope | None) -> None:
        self.seq += 1
        if env is None:
            env = Envelope(self.run_id, self.seq, time.time_ns(), kind, data)
        self.out.write(encode_envelope(env) + b"\n")
        self.out.flush()


class HumanPrinter(_Printer):
    """Streams text as it comes; reasoning dimmed (or prefixed when not a terminal)."""

    def __init__(self, out: IO[str], color: bool) -> None:
        self.out = out
        self.color = color
        self.mode = ""  # "", "text" or "reasoning": what the current line holds

    def _switch(self, mode: str) -> None:
        if self.mode == mode:
            return
        if self.mode == "reasoning" and self.color:
            self.out.write(RESET)
        if self.mode:
            self.out.write("\n")
        if mode == "reasoning":
            self.out.write(DIM + "thinking: " if self.color else "thinking: ")
        self.mode = mode

    def line(self, text: str) -> None:
        self._switch("")
        self.out.write(text + "\n")

    def write(self, kind: str, data: dict[str, Any], env: Envelope | None) -> None:
        if kind == "content_delta":
            self._switch("text")
            self.out.write(data.get("delta", ""))
        elif kind == "reasoning_delta":
            self._switch("reasoning")
            self.out.write(data.get("delta", ""))
        elif kind == "tool_call_start":
            args = json.dumps(data.get("arguments", {}), ensure_ascii=False)
            self.line(f"→ {data.get('name')}({clip(args, 120)})  [{data.get('id')}]")
        elif kind == "tool_call_result":
            mark = "ok" if data.get("success") else "failed"
            shown = data.get("resultPreview") if data.get("success") else data.get("error")
            self.line(
                f"← {data.get('name')} {mark} ({data.get('durationMs', 0):.0f} ms): "
                f"{clip(str(shown or ''), 160)}"
            )
        elif kind == "tool_error":
            self.line(f"✗ {data.get('name')} error: {data.get('error')}")
        elif kind in ("steer", "soft_timeout", "budget_exhausted", "hook_action", "error"):
            self.line(f"[{kind}] " + json.dumps(data, ensure_ascii=False))
        elif kind == "completion" and data.get("status") != "executing":
            self.line(" · ".join(_summary(data)))
        self.out.flush()


def _summary(completion: dict[str, Any]) -> list[str]:
    """The parts of the closing line a completion has figures for (a plugged loop's may not)."""
    parts = [f"— {completion.get('status')} ({completion.get('reason')})"]
    if completion.get("round") is not None:
        parts.append(f"{completion['round']} round(s)")
    if completion.get("toolCallCount") is not None:
        parts.append(f"{completion['toolCallCount']} tool call(s)")
    if "promptTokens" in completion or "completionTokens" in completion:
        tokens = (completion.get("promptTokens") or 0) + (completion.get("completionTokens") or 0)
        parts.append(f"{tokens} tokens")
    if completion.get("elapsedMs") is not None:
        parts.append(f"{completion['elapsedMs'] / 1000:.2f} s")
    return parts


def read_prompt(given: str) -> str:
    """The prompt as given, or standard input's for ``-``; ValueError when it is empty."""
    prompt = sys.stdin.read() if given == "-" else given
    if not prompt.strip():
        where = " (standard input had none)" if given == "-" else ""
        raise ValueError(f"the prompt is empty{where}")
    return prompt


def run_command(args: argparse.Namespace) -> int:
    try:
        prompt = read_prompt(args.prompt)
        config = config_items(args.config, args.max_rounds)
        given = {k: getattr(args, k) for k in SETTING_FLAGS}
        # One turn, printed as it goes: nothing to keep, whatever LOOPGATE_JOURNAL says.
        settings = load_settings(os.environ, {**given, "journal": "memory"})
        if args.workspace and not Path(args.workspace).is_dir():
            raise ValueError(f"--workspace {args.workspace} is not a directory")
    except ValueError as exc:
        print(f"loopgate run: {exc}", file=sys.stderr)
        return 2
    terminal = Terminal.open(sys.stderr)
    policy: ApprovalPolicy = "yes" if args.yes else "no" if args.no else "ask"
    approvals = TerminalApprovals(policy, terminal)
    sink: _Printer
    if args.json:
        sink = NdjsonPrinter(args.run_id or "", sys.stdout.buffer)
    else:
        sink = HumanPrinter(sys.stdout, color=sys.stdout.isatty())
    # Questions from ask_user are answered only in the readable output: NDJSON has no place
    # for the answer, and its consumer is seldom the person at the terminal.
    session = _Session(sink, terminal, approvals, answers=not args.json)
    request = StartRun(input=prompt, config=config, run_id=args.run_id)
    try:
        code = run_async("run", session.run, settings, request)
    finally:
        if terminal is not None:
            terminal.close()
    if sink.broken:
        # Keep Python from complaining about the closed pipe again at interpreter exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


class _Session:
    """The runs of one ``loopgate run``: the first, then one more per question answered."""

    def __init__(
        self,
        sink: _Printer,
        terminal: Terminal | None,
        approvals: TerminalApprovals,
        *,
        answers: bool,
    ) -> None:
        self.sink = sink
        self.terminal = terminal
        self.approvals = approvals
        # Why a question from ask_user cannot be answered, or None when it can.
        self.unanswerable: str | None = None
        if terminal is None or not terminal.can_ask:
            self.unanswerable = (
                "the model asked a question (ask_user) that only an interactive terminal can answer"
            )
        elif not answers:
            self.unanswerable = (
                "the model asked a question (ask_user); run without --json to answer it"
            )
        self.spinner = ToolSpinner(terminal) if terminal is not None else None
        self.signalled = False
        self.run_id: str | None = None  # the run going now

    async def run(self, settings: Settings, request: StartRun) -> int:
        refused: ValueError | None = None
        code = EXIT_CODES["cancelled"]  # should the task group be cancelled before the turns end
        async with command_hub(settings) as hub, anyio.create_task_group() as tg:
            await tg.start(self._cancel_on_signals, hub)
            if self.spinner is not None:
                tg.start_soon(self.spinner.run)
            try:
                code = await self._turns(hub, request)
            except ValueError as exc:  # the hub's words: a bad --config, a taken --run-id
                refused, code = exc, 2
            tg.cancel_scope.cancel()
        if refused is not None:
            # Out here: raised inside the task group it would come out as an ExceptionGroup.
            raise StartupError(str(refused))
        return code

    async def _turns(self, hub: Hub, request: StartRun) -> int:
        sink = self.sink
        for answered in range(MAX_ANSWERS + 1):
            info = await hub.start(request)
            self.run_id = info.id
            events = await self._follow(hub, info.id)
            conversation = conversation_after(info.input, events)
            question = asked_question(sink.completion, conversation.messages)
            if question is None or sink.broken or self.signalled:
                break
            if self.unanswerable is not None:
                _say(self.unanswerable)
                break
            if answered == MAX_ANSWERS:
                _say(f"the model asked more than {MAX_ANSWERS} questions; stopping here")
                break
            assert self.terminal is not None
            answer = await self.terminal.ask(question_prompt(question))
            if self.terminal.interrupted or self.signalled:
                return EXIT_CODES["cancelled"]
            if answer is None or not answer.strip():
                break  # no answer: the run ends waiting for one, as without a terminal
            request = StartRun(
                input=continued(conversation, answer),
                config=request.config,
                thread_id=info.thread_id,
            )
        return EXIT_CODES.get(sink.status or "failed", 1)

    async def _follow(self, hub: Hub, run_id: str) -> list[Envelope]:
        """Print the run's events until its end, answering its permission requests."""
        shown = _Shown(self, hub, run_id)
        await shown.run()
        return shown.events

    async def show(self, hub: Hub, run_id: str, batch: list[Envelope]) -> None:
        """Print a batch of the run's events, answering its permission requests."""
        for env in batch:
            if self.spinner is not None:
                self.spinner.observe(env.kind, env.data)
            self.sink.show(env.kind, env.data, env)
            if env.kind == PERMISSION_REQUEST:
                await self._answer(hub, run_id, env.data)
        if self.sink.broken and not self.signalled:
            self.signalled = True
            await hub.cancel(run_id)

    async def _answer(self, hub: Hub, run_id: str, request: dict[str, Any]) -> None:
        raw = request.get("toolCall") or {}
        arguments = raw.get("arguments")
        call = ToolCall(
            id=str(raw.get("id", "")),
            name=str(raw.get("name", "")),
            arguments=arguments if isinstance(arguments, dict) else {},
        )
        allowed = await self.approvals.decide(call) == "allow"
        decision = "allow_once" if allowed else "reject_once"
        await hub.respond(run_id, str(request.get("requestId")), decision)

    async def _cancel_on_signals(
        self, hub: Hub, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        # Ctrl-C cancels the run (the loop still ends it with its terminal completion); at a
        # question it only ends the question: no to an approval, the end of the run (130) for
        # ask_user's, which has no run left to cancel.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                terminal = self.terminal
                if signum == signal.SIGINT and terminal is not None and terminal.interrupt():
                    continue
                self.signalled = True
                if terminal is not None:
                    terminal.interrupt()
                if self.run_id is not None:
                    await hub.cancel(self.run_id)


class _Shown(EventStream[Envelope, list[Envelope]]):
    """One run of the command, as it goes: its envelopes as they are (the native projection),
    kept for the conversation that follows it. A terminal slower than the run catches up
    from the journal instead of being cut off."""

    def __init__(self, session: _Session, hub: Hub, run_id: str) -> None:
        projector = NativeProjector(ProjectorContext(run_id=run_id, thread_id=run_id))
        super().__init__(hub, run_id, projector, RESUMING, consumer="run")
        self.session = session
        self.hub = hub
        self.events: list[Envelope] = []

    def project(self, batch: list[Envelope]) -> list[Envelope]:
        self.events.extend(batch)
        return batch

    async def send(self, messages: list[Envelope]) -> None:
        await self.session.show(self.hub, self.run_id, messages)


def _say(text: str) -> None:
    print(f"loopgate run: {text}", file=sys.stderr)
