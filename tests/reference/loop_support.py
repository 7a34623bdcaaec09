"""Fakes, stream checks and the ``loopgate run`` runner shared by the reference-loop tests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from loopgate.contracts import validate_event
from loopgate.contracts.messages import Message, ToolCall, ToolSpec
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tools import DemoTools
from loopgate.gateway.reference.types import (
    FinishChunk,
    LoopContext,
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolResult,
    UsageChunk,
)


class Sleep:
    """A pause inside a scripted response."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Step = ModelChunk | Sleep | BaseException
Script = list[Step]


class FakeProvider:
    """Plays one script per model request, in order; the last script repeats."""

    name = "fake"
    model = "fake-model"

    def __init__(self, *scripts: Script) -> None:
        self.scripts = list(scripts)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(request)
        index = min(len(self.requests) - 1, len(self.scripts) - 1)
        return self._play(self.scripts[index])

    async def _play(self, script: Script) -> AsyncIterator[ModelChunk]:
        for step in script:
            if isinstance(step, Sleep):
                await anyio.sleep(step.seconds)
            elif isinstance(step, BaseException):
                raise step
            else:
                yield step


def text(*deltas: str, usage: tuple[int, int] | None = (10, 5)) -> Script:
    steps: Script = [TextChunk(d) for d in deltas]
    steps.append(FinishChunk("stop"))
    if usage:
        steps.append(UsageChunk(prompt_tokens=usage[0], completion_tokens=usage[1]))
    return steps


def calls(*specs: tuple[str, dict[str, Any]], usage: tuple[int, int] | None = (10, 5)) -> Script:
    """A response with one tool call per (name, arguments); ids are call_0, call_1 …"""
    steps: Script = []
    for i, (name, args) in enumerate(specs):
        steps.append(ToolCallChunk(index=i, id=f"call_{i}", name=name, arguments=json.dumps(args)))
    steps.append(FinishChunk("tool_calls"))
    if usage:
        steps.append(UsageChunk(prompt_tokens=usage[0], completion_tokens=usage[1]))
    return steps


def reasoning(*deltas: str) -> Script:
    return [ReasoningChunk(d) for d in deltas]


Handler = Callable[[ToolCall], Awaitable[ToolResult]]


class FakeExecutor:
    """Tools from handlers; records when each call started and ended (anyio clock)."""

    def __init__(self, handlers: dict[str, Handler], safe: set[str] | None = None) -> None:
        self.handlers = handlers
        self.safe = safe or set()
        self.spans: list[tuple[str, float, float]] = []
        self.executed: list[ToolCall] = []

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(name=name) for name in self.handlers]

    def concurrency_safe(self, call: ToolCall) -> bool:
        return call.name in self.safe

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        self.executed.append(call)
        start = anyio.current_time()
        try:
            return await self.handlers[call.name](call)
        finally:
            self.spans.append((call.id, start, anyio.current_time()))


def ok(content: str = "ok", delay: float = 0.0) -> Handler:
    async def handler(call: ToolCall) -> ToolResult:
        if delay:
            await anyio.sleep(delay)
        return ToolResult(success=True, content=content)

    return handler


def failing(error: str = "boom") -> Handler:
    async def handler(call: ToolCall) -> ToolResult:
        return ToolResult(success=False, error=error)

    return handler


class Recorder:
    """An EventSink that keeps every event and validates it against the payload views."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.times: list[float] = []
        self.on_event: Callable[[str, dict[str, Any]], None] | None = None

    async def __call__(self, kind: str, data: dict[str, Any]) -> None:
        validate_event(kind, data)
        self.events.append((kind, data))
        self.times.append(anyio.current_time())
        if self.on_event is not None:
            self.on_event(kind, data)

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for k, d in self.events if k == kind]

    @property
    def terminal(self) -> dict[str, Any]:
        return self.events[-1][1]

    def text(self) -> str:
        return "".join(d["delta"] for d in self.of("content_delta"))


def check_stream(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The invariants every turn keeps; returns the terminal completion."""
    terminals = [
        (i, d)
        for i, (k, d) in enumerate(events)
        if k == "completion" and d["status"] != "executing"
    ]
    assert len(terminals) == 1, f"expected one terminal completion, got {terminals}"
    index, terminal = terminals[0]
    assert index == len(events) - 1, "the terminal completion must be the last event"
    open_requests = 0
    started: list[str] = []
    finished: list[str] = []
    for kind, data in events:
        if kind == "llm_request":
            assert open_requests == 0
            open_requests = 1
        elif kind == "llm_response":
            assert open_requests == 1
            open_requests = 0
        elif kind in ("content_delta", "reasoning_delta"):
            assert open_requests == 1 or kind == "content_delta"  # narration follows a response
        elif kind == "tool_call_start":
            started.append(data["id"])
        elif kind in ("tool_call_result", "tool_error"):
            finished.append(data["id"])
        elif kind == "completion" and data["status"] == "executing":
            assert started == finished, "every tool call resolves before the round ends"
    pending = set(terminal.get("pendingToolCallIds", []))
    if terminal["status"] not in ("cancelled", "failed"):
        assert [i for i in started if i not in pending] == finished
    return terminal


def user(content: str) -> list[Message]:
    return [Message(role="user", content=content)]


def loopgate_run(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``loopgate run ARGS`` without a terminal: stdin, stdout and stderr are pipes."""
    return subprocess.run(
        [sys.executable, "-m", "loopgate", "run", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        encoding="utf-8",
        start_new_session=True,  # no controlling terminal, even under a developer's shell
    )


async def run_scripted(
    prompt: str, tmp_path: Path, config: LoopConfig | None = None, **kwargs: Any
) -> tuple[Recorder, list[Message], dict[str, Any]]:
    """One turn of the embedded scripted model with the demo tools: what it emitted (checked
    by ``check_stream``), its history, and the stream's summary."""
    loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(tmp_path), config, **kwargs)
    rec = Recorder()
    history = await loop.run_turn(user(prompt), rec)
    return rec, history, check_stream(rec.events)
