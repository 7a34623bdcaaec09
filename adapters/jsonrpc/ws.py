"""``GET /rpc/ws``: a bidirectional JSON-RPC connection, one JSON message per text frame.

uvicorn answers pings and sends its own (every 20 s) and closes with 1009 a frame larger than
``max_frame_bytes``; messages up to that but over ``RpcLimits.max_message_bytes`` get a
-32006 error and the connection goes on.
"""

from __future__ import annotations

import anyio
from starlette.websockets import WebSocket

from ...contracts.limits import EndpointLimits
from ..shared.ws import client_of, close_stopped_reader, origin_allowed, refuse
from .dispatch import Dispatcher
from .session import Session


async def serve_socket(
    websocket: WebSocket, dispatcher: Dispatcher, limits: EndpointLimits
) -> None:
    if not origin_allowed(websocket, limits):
        await refuse(websocket, "origin not allowed")
        return
    await websocket.accept()
    send_asgi = websocket.send

    async def send(messages: list[bytes]) -> None:
        for message in messages:
            await send_asgi({"type": "websocket.send", "text": message.decode()})

    client_left = False
    async with anyio.create_task_group() as tg:
        session = Session(dispatcher, send, tg, peer=f"{client_of(websocket)} (WebSocket)")
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    client_left = True
                    break
                raw = message.get("text")
                await session.receive(raw if raw is not None else message.get("bytes") or b"")
        finally:
            # Ends every subscription of this connection (their hub cursors are released).
            tg.cancel_scope.cancel()
    if not client_left:
        # The session gave up on a client that stopped reading: 1008 = policy violation.
        await close_stopped_reader(websocket)
