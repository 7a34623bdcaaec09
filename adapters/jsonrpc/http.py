"""``POST /rpc`` (one request or a batch per body) and ``GET /rpc/ws`` (WebSocket) routes.

HTTP status: 200 with the response body; 204 when nothing is to be answered (notifications
only); 413 for a body over the limit or a batch of more than ``max_batch`` items (-32006) and
415 for a body that is not declared JSON, both still with a JSON-RPC error body. Requiring
``application/json`` keeps browsers from posting to a local gateway cross-site without a CORS
preflight.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ...contracts.limits import EndpointLimits
from ..shared.body import read_body
from ..shared.problem import HttpProblem
from ..shared.rpc_errors import INVALID_REQUEST
from .dispatch import Dispatcher, TooLarge, too_large
from .errors import error_object
from .methods import Trace
from .protocol import Failure, encode

JSON = "application/json"


def json_reply(body: bytes, status: int = 200) -> Response:
    return Response(body, status, media_type=JSON)


def routes(dispatcher: Dispatcher, limits: EndpointLimits) -> list[BaseRoute]:
    max_bytes = dispatcher.limits.max_message_bytes

    async def post_rpc(request: Request) -> Response:
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != JSON and not media_type.endswith("+json"):
            detail = f"Content-Type must be {JSON}, got {media_type or 'none'!r}"
            body = encode(Failure(error=error_object(INVALID_REQUEST, detail), id=None))
            return json_reply(body, 415)
        try:
            raw = await read_body(request, max_bytes)
        except HttpProblem:
            return json_reply(too_large(f"request body is larger than {max_bytes} bytes"), 413)
        headers = request.headers
        trace = Trace(headers.get("traceparent"), headers.get("tracestate"))
        reply = await dispatcher.handle(raw, trace=trace)
        if reply is None:
            return Response(status_code=204)
        return json_reply(reply, 413 if isinstance(reply, TooLarge) else 200)

    async def rpc_socket(websocket: WebSocket) -> None:
        from .ws import serve_socket

        await serve_socket(websocket, dispatcher, limits)

    return [
        Route("/rpc", post_rpc, methods=["POST"]),
        WebSocketRoute("/rpc/ws", rpc_socket),
    ]
