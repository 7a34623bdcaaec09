"""What a hub runs and tells: the sources a run's events come from, and the observers of its
runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ...contracts.messages import Message
from ...contracts.ports import StartRun
from .run import Producer, Run

if TYPE_CHECKING:
    from .hub import Hub


def input_messages(request: StartRun) -> list[Message]:
    if isinstance(request.input, str):
        return [Message(role="user", content=request.input)]
    return list(request.input or [])


class Source(Protocol):
    """Where a run's events come from (the reference loop, an external loop, a recording)."""

    def prepare(self, request: StartRun) -> Any:
        """Validate the request before the run exists; raise ValueError saying what is wrong."""
        ...

    def producer(self, hub: Hub, run: Run, prepared: Any) -> Producer: ...


# Called with a run right after it is created, before its first event (telemetry opens the
# run's span here, may add to its metadata, and may observe the run's events: Run.observers).
RunObserver = Callable[[Run], None]
