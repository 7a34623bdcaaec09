"""The A2A registry entry: projector, SSE rendering of stream items, builtins for goldens."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext
from ..shared import sse
from .projector import A2AProjector
from .wire import Item, stream_item

MEDIA_TYPE = sse.MEDIA_TYPE
_FRAME = b"data: %b\n\n"


class A2AAdapter:
    """``contracts.projector.Adapter`` for A2A 1.0: ``render`` frames the HTTP+JSON binding's
    stream (one ``StreamResponse`` per ``data:`` line); the JSON-RPC binding wraps each in a
    JSON-RPC response of the request's id (adapters.a2a.rpc)."""

    name: str = "a2a"
    media_type: str = MEDIA_TYPE

    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder().encode

    def projector(self, context: ProjectorContext) -> A2AProjector:
        return A2AProjector(context)

    def to_builtins(self, message: Item) -> Any:
        return msgspec.to_builtins(stream_item(message))

    def render(self, messages: list[Item]) -> bytes:
        encode = self._encode
        return b"".join(_FRAME % encode(stream_item(message)) for message in messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .endpoints import routes

        return routes(self, service, limits)


ADAPTER = A2AAdapter()
