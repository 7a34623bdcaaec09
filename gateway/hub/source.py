"""What a hub runs and tells: the sources a run's events come from, and the observers of its
runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...contracts.messages import Message
from ...contracts.ports import MAX_TRACESTATE_CHARS, StartRun
from ...contracts.principal import Principal
from ..journal.base import RunRecord
from .run import Producer, Run, new_record

if TYPE_CHECKING:
    from .hub import Hub


def input_messages(request: StartRun) -> list[Message]:
    if isinstance(request.input, str):
        return [Message(role="user", content=request.input)]
    return list(request.input or [])


def start_record(
    request: StartRun, run_id: str, principal: Principal, agent: str | None, now: int
) -> RunRecord:
    """The record of a run ``request`` starts, as ``principal``, at ``now``."""
    metadata = dict(request.metadata)
    if request.traceparent:
        metadata.setdefault("traceparent", request.traceparent)
        # W3C: at most 32 members of 256 characters; a longer one is dropped, not cut.
        if request.tracestate and len(request.tracestate) <= MAX_TRACESTATE_CHARS:
            metadata.setdefault("tracestate", request.tracestate)
    record = new_record(run_id, request.thread_id or run_id, request.source, now, metadata)
    record.input = input_messages(request)
    record.owner = principal.owner
    record.agent = agent
    record.webhook = request.webhook
    return record


class Source(Protocol):
    """Where a run's events come from (the reference loop, an external loop, a recording)."""

    def prepare(self, request: StartRun) -> Any:
        """Validate the request before the run exists; raise ValueError saying what is wrong."""
        ...

    def producer(self, hub: Hub, run: Run, prepared: Any) -> Producer: ...


# Called with a run right after it is created, before its first event (telemetry opens the
# run's span here, may add to its metadata, and may observe the run's events: Run.observers).
RunObserver = Callable[[Run], None]
