"""Regenerate the recorded LoopEvent streams in ``conformance/streams/``.

    python -m conformance.record                 # every stream
    python -m conformance.record plain-answer    # only the named ones

Most streams are recorded through ``loopgate run --json`` exactly as a user would; the ones that
need a second actor (cancel, steer, hooks, client tools) use the Python API with the same
envelope writer. Each stream's run id is its file stem. Text, tool calls and event order are
deterministic; ``ts``, durations and the clock tool's answer are real, so a re-recording differs
only there (and the AG-UI goldens must then be regenerated).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from loopgate.contracts.envelope import Envelope, encode_envelope
from loopgate.contracts.messages import Message, ToolSpec
from loopgate.contracts.parts import Part, TextPart, media
from loopgate.gateway.commands.run import NdjsonPrinter
from loopgate.gateway.reference.control import TurnControl
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.hooks import Continue, Fail, Narrate, NoHooks, Proceed, Retry
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tools import DemoTools

STREAMS = Path(__file__).resolve().parent / "streams"
DELAY = "0.004"

# name → loopgate run arguments (the prompt first).
CLI_STREAMS: dict[str, list[str]] = {
    "plain-answer": ["plain: say hello to the gateway"],
    "reasoning-answer": ["think about why the sky is blue"],
    "one-tool-round": ["one tool: what is 17 times 23?"],
    "parallel-tools": ["What time is it, and what is 12 times 34?"],
    "failing-tool": ["fail tool: read my notes"],
    "tool-timeout": ["slow tool: run the nightly job", "--config", "tool_timeout_ms=200"],
    "max-rounds": ["forever: keep counting", "--max-rounds", "3"],
    "soft-timeout-wrap-up": [
        "forever: count until told to stop",
        "--scripted-delay",
        "0.01",
        "--config",
        "soft_timeout_ms=250",
        "--config",
        "wrap_up_keeps_tools=true",
        "--config",
        "wrap_up_max_tool_rounds=1",
    ],
    "provider-error": ["provider error: summarise the quarterly report"],
    "unicode-deltas": ["unicode: greet the world"],
    "big-tool-result": [
        "big result: fetch the archive",
        "--config",
        "persist_tool_results=true",
    ],
    "waiting-user": ["ask user: plan my trip"],
}


def record_cli(name: str, args: list[str], workspace: Path) -> None:
    argv = [sys.executable, "-m", "loopgate", "run", "--json", "--run-id", name]
    if "--scripted-delay" not in args:
        argv += ["--scripted-delay", DELAY]
    proc = subprocess.run(
        [*argv, *args], cwd=workspace, capture_output=True, check=False, timeout=120
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: loopgate run failed: {proc.stderr.decode(errors='replace')}")
    (STREAMS / f"{name}.jsonl").write_bytes(proc.stdout)


# --- streams that need the Python API ---------------------------------------------------------

Scenario = Callable[[Path, Path], Awaitable[None]]


async def _turn(
    path: Path,
    prompt: str,
    workspace: Path,
    *,
    on_event: Callable[[str, dict[str, Any], TurnControl], Awaitable[None] | None] | None = None,
    **loop_kwargs: Any,
) -> None:
    provider = ScriptedProvider(delay_s=float(DELAY))
    loop = CoreLoop(provider, DemoTools(workspace), **loop_kwargs)
    control = TurnControl()
    with path.open("wb") as out:
        printer = NdjsonPrinter(path.stem, out)

        async def emit(kind: str, data: dict[str, Any]) -> None:
            await printer(kind, data)
            if on_event is not None:
                maybe = on_event(kind, data, control)
                if maybe is not None:
                    await maybe

        await loop.run_turn([Message(role="user", content=prompt)], emit, control)


# A 1x1 PNG and a short text file: a screenshot and notes pasted into a chat.
_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


async def attachments(path: Path, workspace: Path) -> None:
    """A prompt with an image and a text file to the scripted model, which reads text only:
    its ``llm_request`` names them (``attachmentsAsText``)."""
    content: list[Part] = [
        TextPart(text="plain: describe the screenshot and the notes"),
        media("image", media_type="image/png", data=_PNG, name="shot.png"),
        media("file", media_type="text/plain", data="bGluZSBvbmUK", name="notes.txt"),
    ]
    loop = CoreLoop(ScriptedProvider(delay_s=float(DELAY)), DemoTools(workspace))
    with path.open("wb") as out:
        printer = NdjsonPrinter(path.stem, out)
        await loop.run_turn([Message(role="user", content=content)], printer, TurnControl())


async def cancel_mid_text(path: Path, workspace: Path) -> None:
    seen = 0

    def on_event(kind: str, data: dict[str, Any], control: TurnControl) -> None:
        nonlocal seen
        if kind == "content_delta":
            seen += 1
            if seen == 6:
                control.cancel()

    await _turn(path, "plain: explain what a protocol gateway does", workspace, on_event=on_event)


async def cancel_mid_tool(path: Path, workspace: Path) -> None:
    async with anyio.create_task_group() as tg:

        async def cancel_later(control: TurnControl) -> None:
            await anyio.sleep(0.1)
            control.cancel()

        def on_event(kind: str, data: dict[str, Any], control: TurnControl) -> None:
            if kind == "tool_call_start":
                tg.start_soon(cancel_later, control)

        await _turn(path, "slow tool: rebuild the index", workspace, on_event=on_event)


async def steering(path: Path, workspace: Path) -> None:
    def on_event(kind: str, data: dict[str, Any], control: TurnControl) -> None:
        if kind == "tool_call_start" and data["name"] == "clock":
            control.steer("plain: actually, just give me the short version")

    await _turn(path, "What is the time, and what is 6 times 7?", workspace, on_event=on_event)


class DemoHooks(NoHooks):
    """Exercises every action a hook can return, once or more, in one turn."""

    def __init__(self) -> None:
        self.completions = 0

    def pre_step(self, ctx: Any) -> Proceed:
        return Proceed()

    def post_tool_result(self, ctx: Any, call: Any, result: Any) -> Continue:
        return Continue()

    def tool_made_progress(self, ctx: Any, round_summary: Any) -> Proceed:
        return Proceed()

    async def before_completion(self, ctx: Any, text: str) -> Retry | Narrate:
        self.completions += 1
        if self.completions == 1:
            return Retry(message="plain: please restate that in one sentence")
        return Narrate(text="\n\n— checked by the before_completion hook")


async def hook_actions(path: Path, workspace: Path) -> None:
    await _turn(path, "one tool: what is 8 times 9?", workspace, hooks=DemoHooks())


class RetryOnce(NoHooks):
    def on_request_error(self, ctx: Any, error: BaseException, attempt: int) -> Retry | Fail:
        return Retry(delay_ms=20) if attempt == 1 else Fail()


async def provider_error_retry(path: Path, workspace: Path) -> None:
    await _turn(path, "provider error: try twice", workspace, hooks=RetryOnce())


async def client_tool(path: Path, workspace: Path) -> None:
    spec = ToolSpec(
        name="confirm_booking",
        description="Show a confirmation dialog in the client and return the user's choice.",
        parameters={
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"],
        },
    )
    await _turn(path, "client tool: confirm the booking for Friday", workspace, client_tools=[spec])


async def truncated(path: Path, workspace: Path) -> None:
    """A producer that died mid-turn: a one-tool run cut after its first tool result."""
    full = anyio.Path(path.with_suffix(".full"))  # same stem, so the same run id
    await _turn(Path(full), "one tool: what is 9 times 9?", workspace)
    lines = (await full.read_bytes()).splitlines(keepends=True)
    await full.unlink()
    cut = next(i for i, line in enumerate(lines) if b'"tool_call_result"' in line)
    await anyio.Path(path).write_bytes(b"".join(lines[: cut + 1]))


API_STREAMS: dict[str, Scenario] = {
    "cancel-mid-text": cancel_mid_text,
    "cancel-mid-tool": cancel_mid_tool,
    "steering": steering,
    "hook-actions": hook_actions,
    "provider-error-retry": provider_error_retry,
    "client-tool": client_tool,
    "truncated": truncated,
    "attachments": attachments,
}


# --- hand-written -----------------------------------------------------------------------------

T0 = 1_764_000_000_000_000_000  # 2025-11-24T16:00:00Z in ns


def unknown_kinds_fields() -> list[tuple[str, dict[str, Any]]]:
    """Kinds a future engine may add and fields consumers must pass through or ignore."""
    return [
        ("stage_start", {"model": "other-engine-model", "round": 1, "engine": "other/2.1"}),
        ("x_memory_recall", {"items": [{"id": "m1", "score": 0.82}], "round": 1}),
        ("llm_request", {"round": 1, "attempt": 1, "cacheKey": "k-7f3a"}),
        ("reasoning_delta", {"delta": "Look it up first.", "signature": "sig-01"}),
        ("content_delta", {"delta": "Searching", "lang": "en"}),
        ("vendor.progress", {"percent": 40, "label": "retrieval"}),
        (
            "llm_response",
            {
                "round": 1,
                "attempt": 1,
                "promptTokens": 42,
                "completionTokens": 9,
                "cachedTokens": 30,
                "costUsd": 0.00012,
            },
        ),
        (
            "tool_call_start",
            {
                "id": "call_u1",
                "name": "search",
                "round": 1,
                "arguments": {"q": "loopgate"},
                "kindHint": "fetch",
            },
        ),
        ("tool_progress", {"id": "call_u1", "percent": 50}),
        (
            "tool_call_result",
            {
                "id": "call_u1",
                "name": "search",
                "success": True,
                "durationMs": 12.5,
                "resultPreview": "3 results",
                "annotations": [{"type": "citation", "url": "https://example.org"}],
            },
        ),
        (
            "stage_complete",
            {
                "round": 1,
                "toolCallCount": 1,
                "consecutiveToolErrors": 0,
                "elapsedMs": 40.2,
                "queueDepth": 0,
            },
        ),
        (
            "completion",
            {"status": "executing", "reason": "tool_calls", "round": 1, "x_next": "round 2"},
        ),
        ("stage_start", {"model": "other-engine-model", "round": 2}),
        ("llm_request", {"round": 2, "attempt": 1}),
        ("content_delta", {"delta": " done: 3 results.", "x_meta": {"nested": {"a": [1, 2]}}}),
        ("llm_response", {"round": 2, "attempt": 1, "promptTokens": 60, "completionTokens": 6}),
        ("x_audit", {"actor": "policy", "decision": "allow"}),
        (
            "completion",
            {
                "status": "completed",
                "reason": "stop",
                "confidence": 0.9,
                "round": 2,
                "finishReason": "stop",
                "textLength": 27,
                "toolCalls": ["search"],
                "toolCallCount": 1,
                "toolErrorCount": 0,
                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
            },
        ),
    ]


def write_hand_written(name: str, events: list[tuple[str, dict[str, Any]]]) -> None:
    lines = [
        encode_envelope(Envelope(name, seq, T0 + seq * 1_700_000, kind, data)) + b"\n"
        for seq, (kind, data) in enumerate(events, start=1)
    ]
    (STREAMS / f"{name}.jsonl").write_bytes(b"".join(lines))


HAND_WRITTEN = {"unknown-kinds-fields": unknown_kinds_fields}


def all_names() -> list[str]:
    return [*CLI_STREAMS, *API_STREAMS, *HAND_WRITTEN]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"streams to record (default all): {all_names()}")
    args = parser.parse_args(argv)
    names = args.names or all_names()
    unknown = sorted(set(names) - set(all_names()))
    if unknown:
        parser.error(f"unknown stream(s): {', '.join(unknown)}")
    STREAMS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        for name in names:
            if name in CLI_STREAMS:
                record_cli(name, CLI_STREAMS[name], workspace)
            elif name in API_STREAMS:
                anyio.run(API_STREAMS[name], STREAMS / f"{name}.jsonl", workspace)
            else:
                write_hand_written(name, HAND_WRITTEN[name]())
            print(f"recorded {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
