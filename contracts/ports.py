"""The ports: how adapters start, watch, steer and cancel runs without importing ``gateway``.

``gateway`` implements these; adapters receive an implementation and depend only on the shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol

import msgspec

from contracts.envelope import Envelope, LoopEvent
from contracts.messages import Message, ToolSpec

RunSource = Literal["loop", "ingest", "replay"]
RunState = Literal["running", "finished"]


class StartRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A request to start a run. ``input`` is a prompt or a message history."""

    input: str | list[Message] | None = None
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    source: RunSource = "loop"
    replay: str | None = None
    run_id: str | None = None
    thread_id: str | None = None
    # Tools the client executes itself (AG-UI frontend tools): the loop emits the call and
    # suspends the turn instead of running it.
    client_tools: list[ToolSpec] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    traceparent: str | None = None
    replay_pace: Literal["recorded", "fast"] = "fast"


class RunInfo(msgspec.Struct, kw_only=True):
    id: str
    thread_id: str
    source: RunSource
    state: RunState
    status: str | None  # the terminal completion status once finished
    created_at: int  # unix ns
    last_seq: int
    subscribers: int = 0
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class CommandResult(msgspec.Struct, kw_only=True):
    """Outcome of cancel/steer: ``accepted`` is false for a finished run (a no-op, not an error)."""

    run_id: str
    accepted: bool
    detail: str


class CutOff(Exception):
    """The subscriber fell behind its buffer bound; resume from ``cursor`` via the journal."""

    def __init__(self, cursor: int) -> None:
        super().__init__(f"subscriber fell behind; resume after seq {cursor}")
        self.cursor = cursor


class RunNotFound(LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class LimitReached(Exception):
    """Too many runs or subscribers; ``retry_after`` seconds is a hint for the client."""

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


class RunNotIngest(Exception):
    """Events were pushed into a run whose producer is not an external loop."""


class RunService(Protocol):
    """Everything an adapter may do with runs."""

    async def start(self, request: StartRun) -> RunInfo: ...

    def get(self, run_id: str) -> RunInfo: ...

    def list(self, *, limit: int = 100) -> list[RunInfo]: ...

    async def cancel(self, run_id: str) -> CommandResult: ...

    async def steer(self, run_id: str, content: str) -> CommandResult: ...

    async def push(self, run_id: str, event: LoopEvent) -> Envelope:
        """Append an event from an external loop (ingest runs only)."""
        ...

    async def end_ingest(self, run_id: str) -> None:
        """The external producer is done; a terminal completion is synthesised if missing."""
        ...

    async def history(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[
        Envelope
    ]: ...

    def subscribe(
        self, run_id: str, *, after: int = 0
    ) -> AbstractAsyncContextManager[AsyncIterator[Envelope]]:
        """Events with seq > ``after``, history first then live, ending after the terminal one.

        Iteration raises :class:`CutOff` if this subscriber falls behind its buffer bound.
        """
        ...
