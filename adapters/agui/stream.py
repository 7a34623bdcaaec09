"""AG-UI's stream of a run: RUN_STARTED, the run's events, and whatever closes the stream: the
run's end, an approval interrupt (the stream ends while the run waits), or RUN_ERROR for a
cut-off. Over SSE it is :class:`AguiResponse`; the WebSocket's is in endpoints.py."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from ...contracts.envelope import Envelope
from ...contracts.ports import RunService
from ...contracts.projector import Projector
from ..shared.follow import CUT_OFF_REASON, EventStream, FollowPolicy
from ..shared.stream import ResponseStream

# Relative, as is adapter.py's import of endpoints.py: a file opened at its own path, as
# editors open it, then meets its own class here, not a copy under loopgate.… (docs/plugins.md).
from .adapter import AguiAdapter
from .events import RunError
from .runs import RunPlan

W = TypeVar("W")
# The hub's consumer name for these subscriptions (telemetry).
CONSUMER = "agui"


class AguiStream(EventStream[Any, list[Envelope]]):
    """The run of ``plan`` after ``plan.after``, without the first ``plan.received`` events,
    which the client has: a resumed stream is projected whole (its ids and timestamps are
    those of the stream it resumes) and only the sending skips them. A subclass sends."""

    def __init__(
        self, adapter: AguiAdapter, service: RunService, plan: RunPlan, policy: FollowPolicy
    ) -> None:
        self.adapter = adapter
        self.agui = adapter.projector(plan.context)
        projector = Resumed(self.agui, plan.received) if plan.received else self.agui
        super().__init__(
            service, plan.info.id, projector, policy, consumer=CONSUMER, after=plan.after
        )

    def finished(self) -> bool:
        return self.agui.finished

    def cut_off(self, cursor: int) -> list[Any]:
        return cut_off_events(self.projector)


class AguiResponse(AguiStream, ResponseStream[Any, list[Envelope]]):
    """AG-UI over SSE: the body of a ``POST /agui``."""

    def encode(self, messages: list[Any]) -> bytes:
        return self.adapter.render(messages)


def cut_off_events(projector: Projector[Any]) -> list[Any]:
    """What a cut-off client is told: the projector closes what is open and ends the run with
    RUN_ERROR, whose code is ``subscriber_cut_off`` (its own code for a run ended early is
    ``truncated``), so the client can tell its own slowness from a run cut short."""
    return [
        msgspec.structs.replace(event, code=CUT_OFF_REASON)
        if isinstance(event, RunError)
        else event
        for event in projector.close(CUT_OFF_REASON)
    ]


class Resumed(Generic[W]):
    """``projector`` without its first ``count`` messages, however they are batched: those the
    client of a resumed stream has already."""

    def __init__(self, projector: Projector[W], count: int) -> None:
        self.projector = projector
        self.left = count

    def start(self) -> list[W]:
        return self.rest(self.projector.start())

    def feed(self, envelope: Envelope) -> list[W]:
        return self.rest(self.projector.feed(envelope))

    def close(self, reason: str | None = None) -> list[W]:
        return self.rest(self.projector.close(reason))

    def rest(self, messages: list[W]) -> list[W]:
        """``messages`` after those still to skip."""
        if not self.left:
            return messages
        dropped = min(self.left, len(messages))
        self.left -= dropped
        return messages[dropped:]
