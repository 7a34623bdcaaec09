"""The AG-UI registry entry: projector, SSE rendering, and builtins for goldens."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext
from ..shared import sse
from .projector import AguiProjector

# AG-UI over SSE is ``data: <json>`` events (adapters.shared.sse frames them).
MEDIA_TYPE = "text/event-stream"


class AguiAdapter:
    """``contracts.projector.Adapter`` for AG-UI 1.0 over SSE (WebSocket reuses the projector)."""

    name: str = "agui"
    media_type: str = MEDIA_TYPE

    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder().encode

    def projector(self, context: ProjectorContext) -> AguiProjector:
        return AguiProjector(context)

    def to_builtins(self, message: Any) -> Any:
        return msgspec.to_builtins(message)

    def render(self, messages: list[Any]) -> bytes:
        return sse.data_frames(messages, self._encode)

    def render_json(self, message: Any) -> bytes:
        """One event as bare JSON, for message-based transports (one WebSocket frame each)."""
        return self._encode(message)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .endpoints import routes

        return routes(self, service, limits)


ADAPTER = AguiAdapter()
