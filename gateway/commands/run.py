"""``loopgate run "prompt"``: one turn of the reference loop, printed readably or as NDJSON."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc

from loopgate.contracts.envelope import Envelope, encode_envelope
from loopgate.contracts.messages import Message
from loopgate.gateway.commands.flags import MODEL_SETTINGS, add_model_flags
from loopgate.gateway.commands.terminal import (
    MAX_ANSWERS,
    ApprovalPolicy,
    Terminal,
    TerminalApprovals,
    ToolSpinner,
    answer_question,
    asked_question,
    clip,
    question_prompt,
)
from loopgate.gateway.loop.config import LoopConfig
from loopgate.gateway.loop.control import TurnControl
from loopgate.gateway.loop.core import CoreLoop
from loopgate.gateway.loop.tools import DemoTools
from loopgate.gateway.loops.build import provider_from_settings
from loopgate.gateway.settings import load_settings

EXIT_CODES = {"completed": 0, "waiting_user": 0, "cancelled": 130}
DIM, RESET = "\x1b[2m", "\x1b[0m"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run one turn of the reference loop and print its events",
        description="Run one turn of the reference loop in-process. On a terminal, a tool that "
        "needs approval is asked about (y/N/a), a question from the model (ask_user) is "
        "answered and the run goes on, and a tool call running over a second shows a "
        "spinner on stderr. Exit code: 0 completed (or waiting for the user), 1 failed or "
        "out of budget, 130 cancelled (Ctrl-C).",
    )
    parser.add_argument("prompt", help="the user message; - reads it from standard input")
    parser.add_argument(
        "--json", action="store_true", help="print one event envelope per line (NDJSON)"
    )
    parser.add_argument("--run-id", help="run id for the envelopes (default: a random one)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="JSON|KEY=VALUE",
        help="loop config as a JSON object or key=value (repeatable; values parsed as JSON)",
    )
    add_model_flags(parser.add_argument_group("the model"))
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


def parse_config(items: list[str], max_rounds: int | None) -> LoopConfig:
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
    return LoopConfig.from_dict(merged)


class _Printer:
    """A sink that stops the turn when its reader goes away (``| head``)."""

    status: str | None = None
    completion: dict[str, Any] | None = None  # the last turn's terminal completion
    control: TurnControl | None = None
    broken = False

    async def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "completion" and data.get("status") != "executing":
            self.status = data.get("status")
            self.completion = data
        if self.broken:
            return
        try:
            self.write(kind, data)
        except BrokenPipeError:
            self.broken = True
            if self.control is not None:
                self.control.cancel()

    def write(self, kind: str, data: dict[str, Any]) -> None:
        raise NotImplementedError


class NdjsonPrinter(_Printer):
    """Wraps each event in an envelope (gapless seq from 1) and writes one JSON line."""

    def __init__(self, run_id: str, out: IO[bytes]) -> None:
        self.run_id = run_id
        self.out = out
        self.seq = 0

    def write(self, kind: str, data: dict[str, Any]) -> None:
        self.seq += 1
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

    def write(self, kind: str, data: dict[str, Any]) -> None:
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
            tokens = (data.get("promptTokens") or 0) + (data.get("completionTokens") or 0)
            seconds = (data.get("elapsedMs") or 0) / 1000
            self.line(
                f"— {data.get('status')} ({data.get('reason')}) · {data.get('round')} round(s) · "
                f"{data.get('toolCallCount', 0)} tool call(s) · {tokens} tokens · {seconds:.2f} s"
            )
        self.out.flush()


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
        config = parse_config(args.config, args.max_rounds)
        settings = load_settings(
            os.environ, {k: getattr(args, k) for k in (*MODEL_SETTINGS, "workspace")}
        )
        if args.workspace and not Path(args.workspace).is_dir():
            raise ValueError(f"--workspace {args.workspace} is not a directory")
        provider = provider_from_settings(settings)
    except (ValueError, ImportError) as exc:
        print(f"loopgate run: error: {exc}", file=sys.stderr)
        return 2
    tools = DemoTools(Path(settings.workspace))
    terminal = Terminal.open(sys.stderr)
    policy: ApprovalPolicy = "yes" if args.yes else "no" if args.no else "ask"
    approvals = TerminalApprovals(tools.needs_approval, policy, terminal)
    loop = CoreLoop(provider, tools, config, permissions=approvals)
    if args.json:
        run_id = args.run_id or f"run-{uuid.uuid4().hex[:12]}"
        sink: _Printer = NdjsonPrinter(run_id, sys.stdout.buffer)
    else:
        sink = HumanPrinter(sys.stdout, color=sys.stdout.isatty())
    # Questions from ask_user are answered only in the readable output: NDJSON has no place
    # for the answer, and its consumer is seldom the person at the terminal.
    session = _Session(loop, sink, terminal, answers=not args.json)
    try:
        code = anyio.run(session.run, prompt)
    finally:
        if terminal is not None:
            terminal.close()
    if sink.broken:
        # Keep Python from complaining about the closed pipe again at interpreter exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


class _Session:
    """The turns of one ``loopgate run``: the first, then one more per question answered."""

    def __init__(
        self, loop: CoreLoop, sink: _Printer, terminal: Terminal | None, *, answers: bool
    ) -> None:
        self.loop = loop
        self.sink = sink
        self.terminal = terminal
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

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        if self.spinner is not None:
            self.spinner.observe(kind, data)
        await self.sink(kind, data)

    async def run(self, prompt: str) -> int:
        code = EXIT_CODES["cancelled"]  # should the task group be cancelled before the turns end
        async with anyio.create_task_group() as tg:
            await tg.start(self._cancel_on_signals)
            if self.spinner is not None:
                tg.start_soon(self.spinner.run)
            code = await self._turns([Message(role="user", content=prompt)])
            tg.cancel_scope.cancel()
        return code

    async def _turns(self, history: list[Message]) -> int:
        sink = self.sink
        for answered in range(MAX_ANSWERS + 1):
            sink.control = TurnControl()
            history = await self.loop.run_turn(history, self.emit, sink.control)
            question = asked_question(sink.completion, history)
            if question is None or sink.broken or self.signalled:
                break
            if self.unanswerable is not None:
                _say(self.unanswerable)
                break
            if answered == MAX_ANSWERS:
                _say(f"the model asked more than {MAX_ANSWERS} questions; stopping here")
                break
            assert self.terminal is not None and sink.completion is not None
            answer = await self.terminal.ask(question_prompt(question))
            if self.terminal.interrupted or self.signalled:
                return EXIT_CODES["cancelled"]
            if answer is None or not answer.strip():
                break  # no answer: the run ends waiting for one, as without a terminal
            history = answer_question(history, sink.completion, answer)
        return EXIT_CODES.get(sink.status or "failed", 1)

    async def _cancel_on_signals(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        # Ctrl-C cancels the turn (the loop still prints its terminal completion); at a
        # question it only ends the question: no to an approval, the end of the run (130) for
        # ask_user's, which has no turn left to cancel.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                terminal = self.terminal
                if signum == signal.SIGINT and terminal is not None and terminal.interrupt():
                    continue
                self.signalled = True
                if terminal is not None:
                    terminal.interrupt()
                if self.sink.control is not None:
                    self.sink.control.cancel()


def _say(text: str) -> None:
    print(f"loopgate run: {text}", file=sys.stderr)
