"""The native protocol's projection: envelopes as they are, one SSE event each."""

from __future__ import annotations

from adapters.shared import sse
from adapters.shared.projector import RunProjector
from contracts.envelope import Envelope


class NativeProjector(RunProjector[Envelope]):
    """The identity projection: native SSE carries envelopes unchanged, the terminal one
    last. ``close`` adds nothing: the hub gives every run its terminal event, and a cut-off
    client is told nothing either (the ids it got are its ``Last-Event-ID``)."""

    tracks_parts = False

    def passthrough(self, out: list[Envelope], envelope: Envelope) -> None:
        out.append(envelope)

    def feed_batch(self, batch: list[Envelope]) -> list[Envelope]:
        """``feed`` of every envelope at once, for the live path: the batch itself (a hub
        subscription ends at the run's terminal event, so there is nothing to drop)."""
        return batch


def render_events(envelopes: list[Envelope]) -> bytes:
    return sse.envelope_frames(envelopes)
