"""The native protocol's projection: envelopes as they are, one SSE event each."""

from __future__ import annotations

from ...contracts.encoded import EncodedEnvelopes, EncodedSubscription
from ...contracts.envelope import Envelope
from ...contracts.ports import Subscription
from ..shared import sse
from ..shared.projector import RunProjector


class NativeProjector(RunProjector[Envelope]):
    """The identity projection: native SSE carries envelopes unchanged, the terminal one
    last. ``close`` adds nothing: the hub gives every run its terminal event, and a cut-off
    client is told nothing either (the ids it got are its ``Last-Event-ID``)."""

    tracks_parts = False

    def passthrough(self, envelope: Envelope) -> list[Envelope]:
        return [envelope]

    def feed_batch(self, batch: list[Envelope]) -> list[Envelope]:
        """``feed`` of every envelope at once, for the live path: the batch itself (a hub
        subscription ends at the run's terminal event, so there is nothing to drop)."""
        return batch


class NativeFrames:
    """The native projection rendered: each message is a chunk of SSE frames, what the
    endpoint writes. A batch the hub keeps encoded is framed from its bytes (``read_batch``
    hands it over undecoded): the identity projection has nothing to look at in it."""

    def __init__(self, projector: NativeProjector) -> None:
        self.projector = projector

    def start(self) -> list[bytes]:
        return _rendered(self.projector.start())

    def feed(self, envelope: Envelope) -> list[bytes]:
        return _rendered(self.projector.feed(envelope))

    def close(self, reason: str | None = None) -> list[bytes]:
        return _rendered(self.projector.close(reason))

    def feed_batch(self, batch: list[Envelope] | EncodedEnvelopes) -> list[bytes]:
        if isinstance(batch, EncodedEnvelopes):
            return [sse.envelope_frames(batch)]
        return _rendered(self.projector.feed_batch(batch))


async def read_batch(
    subscription: Subscription, max_wait: float | None
) -> list[Envelope] | EncodedEnvelopes:
    """The next batch, undecoded where the subscription has it encoded (``follow``'s read)."""
    if isinstance(subscription, EncodedSubscription):
        return await subscription.next_encoded(max_wait)
    return await subscription.next_batch(max_wait)


def _rendered(envelopes: list[Envelope]) -> list[bytes]:
    return [render_events(envelopes)] if envelopes else []


def render_events(envelopes: list[Envelope]) -> bytes:
    return sse.envelope_frames(envelopes)
