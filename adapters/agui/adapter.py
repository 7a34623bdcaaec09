"""The AG-UI registry entry: projector, SSE rendering, and builtins for goldens."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from adapters.agui.encoder import MEDIA_TYPE, SseEncoder, sse_frames
from adapters.agui.projector import AguiProjector
from contracts.projector import ProjectorContext


class AguiAdapter:
    """``contracts.projector.Adapter`` for AG-UI 1.0 over SSE (WebSocket reuses the projector)."""

    name: str = "agui"
    framing: Literal["sse"] = "sse"
    media_type: str = MEDIA_TYPE

    def __init__(self) -> None:
        self._encoder = SseEncoder()
        self._encode = self._encoder.encode

    def projector(self, context: ProjectorContext) -> AguiProjector:
        return AguiProjector(context)

    def to_builtins(self, message: Any) -> Any:
        return msgspec.to_builtins(message)

    def render(self, messages: list[Any]) -> bytes:
        # Framed here rather than via SseEncoder.frames: one call level less per live feed,
        # which is most of the per-frame cost beyond the JSON encoding itself.
        if len(messages) == 1:
            return b"data: %b\n\n" % self._encode(messages[0])
        return sse_frames(messages, self._encode)

    def render_json(self, message: Any) -> bytes:
        """One event as bare JSON, for message-based transports (one WebSocket frame each)."""
        return self._encoder.json(message)

    def routes(self, service: Any, limits: Any) -> list[Any]:
        from adapters.agui.endpoints import routes

        return routes(self, service, limits)


ADAPTER = AguiAdapter()
