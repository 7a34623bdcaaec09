"""uvicorn's WebSocket protocol (websockets' sans-I/O machine), with what a client does wrong
taken as the client's doing rather than the server's error.

- A text frame that is not UTF-8 is answered as RFC 6455 says (close 1007) and logged as
  uvicorn does it: at ERROR with a traceback, per frame (issue 29: 2,000 connections wrote
  1.1 MiB of log in 1.1 s). Here: an INFO line, at most one a minute with a count.
- Once the server itself has closed a connection (that 1007, a frame past ``max_size``, a ping
  left unanswered), uvicorn answers the application's next send with ``RuntimeError:
  Unexpected ASGI message 'websocket.send', after sending 'websocket.close'``, which the
  application cannot have avoided: it learns of the close only from its next receive. ASGI
  says a send on a closed connection raises an ``OSError``; so it does here (Starlette turns
  it into ``WebSocketDisconnect``). A send after the application's own close still raises.
- A lost connection's parser is closed, so that nothing of it waits for the cyclic collector.
"""

from __future__ import annotations

from typing import Any

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from .log_limits import RateLimitedLog

INVALID_UTF8 = 1007


class GuardedWebSocketProtocol(WebSocketsSansIOProtocol):
    def __init__(self, *args: Any, report: RateLimitedLog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.report = report
        self.app_closed = False

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        # websockets' parser is a generator holding its protocol: a cycle only the cyclic
        # collector frees, and with it every buffer and header of the connection (measured:
        # 2,000 closed connections' worth kept until a full collection). Closing it ends the
        # cycle, so a connection's memory is free the moment it is lost.
        self.conn.parser.close()

    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type != "text" or self.close_sent:
            super().send_receive_event_to_app()
            return
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        try:
            text = data.decode()
        except UnicodeDecodeError:
            self.report(
                "utf8", "a WebSocket client sent a text frame that is not UTF-8: closed (1007)"
            )
            self.conn.send_close(INVALID_UTF8, "text frame is not UTF-8")
            self.handle_parser_exception()
            return
        self.queue.put_nowait({"type": "websocket.receive", "text": text})
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    async def send(self, message: ASGISendEvent) -> None:
        if self.close_sent and not self.app_closed and self.handshake_complete:
            raise ClientDisconnected()  # closed by the server, for the client's doing
        if message["type"] == "websocket.close":
            self.app_closed = True
        await super().send(message)
