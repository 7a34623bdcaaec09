"""The native protocol's projection: envelopes as they are, one SSE event each."""

from __future__ import annotations

from adapters.shared import sse
from contracts.envelope import Envelope
from contracts.projector import ProjectorContext


class NativeProjector:
    """The identity projection: native SSE carries envelopes unchanged.

    The hub guarantees a terminal event for every run, so ``close`` has nothing to add; a
    cut-off client is told nothing either: the ids it got are its ``Last-Event-ID``.
    """

    def __init__(self, context: ProjectorContext) -> None:
        self.context = context

    def start(self) -> list[Envelope]:
        return []

    def feed(self, envelope: Envelope) -> list[Envelope]:
        return [envelope]

    def feed_batch(self, batch: list[Envelope]) -> list[Envelope]:
        """``feed`` of every envelope at once: the batch itself (the live path)."""
        return batch

    def close(self, reason: str | None = None) -> list[Envelope]:
        return []


def render_events(envelopes: list[Envelope]) -> bytes:
    return sse.envelope_frames(envelopes)
