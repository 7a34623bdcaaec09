"""The Vercel AI SDK registry entry: projector, SSE rendering, builtins for goldens."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext
from ..shared import sse
from .chunks import Chunk, Done
from .projector import VercelProjector

MEDIA_TYPE = sse.MEDIA_TYPE
# How the AI SDK's transports know a UI message stream (UI_MESSAGE_STREAM_HEADERS).
STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
# The stream's last line: the one data line that is not JSON.
DONE_FRAME = b"data: [DONE]\n\n"
_FRAME = b"data: %b\n\n"


class VercelAdapter:
    """``contracts.projector.Adapter`` for the AI SDK's UI message stream (``useChat``'s
    default transport): chunks as ``data:`` lines, then ``data: [DONE]``."""

    name: str = "vercel"
    media_type: str = MEDIA_TYPE

    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder().encode

    def projector(self, context: ProjectorContext) -> VercelProjector:
        return VercelProjector(context)

    def to_builtins(self, message: Chunk) -> Any:
        if type(message) is Done:
            return "[DONE]"
        return msgspec.to_builtins(message)

    def render(self, messages: list[Chunk]) -> bytes:
        """SSE, as adapters.shared.sse frames it: one ``data:`` line per chunk."""
        encode = self._encode
        if len(messages) == 1:  # most of any live stream: a delta, alone
            message = messages[0]
            return DONE_FRAME if type(message) is Done else _FRAME % encode(message)
        return b"".join(
            DONE_FRAME if type(message) is Done else _FRAME % encode(message)
            for message in messages
        )

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .endpoints import routes

        return routes(self, service, limits)


ADAPTER = VercelAdapter()
