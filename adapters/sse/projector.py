"""Envelope → SSE event: ``id`` = seq, ``event`` = kind, ``data`` = the envelope JSON."""

from __future__ import annotations

from contracts.envelope import Envelope, encode_envelope
from contracts.projector import ProjectorContext


class SseProjector:
    """The identity projection: native SSE carries envelopes unchanged.

    The hub guarantees a terminal event for every run, so ``close`` has nothing to add.
    """

    def __init__(self, context: ProjectorContext) -> None:
        self.context = context

    def start(self) -> list[Envelope]:
        return []

    def feed(self, envelope: Envelope) -> list[Envelope]:
        return [envelope]

    def close(self, reason: str | None = None) -> list[Envelope]:
        return []


def render_events(envelopes: list[Envelope]) -> bytes:
    """SSE text for a batch, LF framing. Kinds are validated identifiers and msgspec JSON has no
    raw newlines, so one ``data:`` line per event is always correct."""
    return b"".join(
        b"id: %d\nevent: %s\ndata: %s\n\n" % (e.seq, e.kind.encode(), encode_envelope(e))
        for e in envelopes
    )
