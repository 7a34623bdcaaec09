"""The OpenAI chat-completions registry entry: projector, SSE rendering, builtins for goldens."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response
from starlette.routing import BaseRoute

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext
from ...contracts.refusals import Refusal
from ..shared import sse
from .projector import OpenAIProjector
from .wire import PIECE_TAIL, Carried, Done, Piece, WireMessage

MEDIA_TYPE = sse.MEDIA_TYPE
# The stream's last line: the one data line that is not JSON.
DONE_FRAME = b"data: [DONE]\n\n"
_FRAME = b"data: %b\n\n"
_PIECE = b"data: %b%b" + PIECE_TAIL + b"\n\n"
_CARRIED = b"data: %b%b}\n\n"


class OpenAIAdapter:
    """``contracts.projector.Adapter`` for OpenAI's ``/v1/chat/completions`` (and
    ``/v1/models``): chunks as ``data:`` lines, then ``data: [DONE]``."""

    name: str = "openai"
    media_type: str = MEDIA_TYPE
    # contracts.refusals.ShapesRefusals: a path of OpenAI's API that loopgate does not serve
    # (/v1/embeddings…) is refused in OpenAI's shape too, so the SDKs show why.
    refusal_prefixes: tuple[str, ...] = ("/v1",)

    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder().encode

    def projector(self, context: ProjectorContext) -> OpenAIProjector:
        return OpenAIProjector(context)

    def to_builtins(self, message: WireMessage) -> Any:
        if type(message) is Done:
            return "[DONE]"
        if type(message) is Piece or type(message) is Carried:
            return msgspec.json.decode(self.render_json(message))
        return msgspec.to_builtins(message)

    def render_json(self, message: WireMessage) -> bytes:
        """One message's JSON (``[DONE]`` is not JSON: render frames it)."""
        if type(message) is Piece:
            return message.head + self._encode(message.text) + PIECE_TAIL
        if type(message) is Carried:
            return message.head + self._encode(message.event) + b"}"
        return self._encode(message)

    def render(self, messages: list[WireMessage]) -> bytes:
        """SSE, as adapters.shared.sse frames it: one ``data:`` line per message."""
        encode = self._encode
        if len(messages) == 1:
            message = messages[0]
            if type(message) is Piece:  # most of any live stream: a delta, alone
                return _PIECE % (message.head, encode(message.text))
            if type(message) is Carried:
                return _CARRIED % (message.head, encode(message.event))
            if type(message) is Done:
                return DONE_FRAME
            return _FRAME % encode(message)
        frames = []
        for message in messages:
            if type(message) is Piece:
                frames.append(_PIECE % (message.head, encode(message.text)))
            elif type(message) is Carried:
                frames.append(_CARRIED % (message.head, encode(message.event)))
            elif type(message) is Done:
                frames.append(DONE_FRAME)
            else:
                frames.append(_FRAME % encode(message))
        return b"".join(frames)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .endpoints import routes

        return routes(self, service, limits)

    def refusal_response(self, refusal: Refusal) -> Response:
        from .errors import refusal_response

        return refusal_response(refusal)


ADAPTER = OpenAIAdapter()
