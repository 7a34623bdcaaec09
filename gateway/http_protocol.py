"""uvicorn's h11 protocol with a deadline for every request head.

uvicorn arms no timer on a fresh connection, and its keep-alive timer is cancelled by the first
byte of the next request: a client that sends a header line now and then (slowloris) holds its
socket forever. Here the server's wait for a complete request head — from the moment the
connection opens, and again after each response — is bounded by ``header_timeout_s``; past it
the connection is closed without an answer (there is no request to answer yet).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("loopgate.http")


class GuardedH11Protocol(H11Protocol):
    def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        # A new cycle means a complete head reached the app; a new protocol, a WebSocket upgrade.
        if self.cycle is not cycle or self.transport.get_protocol() is not self:
            self._stop_waiting()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        super().on_response_complete()
        # Unless a pipelined request already started the next cycle, wait for its head anew.
        if self.cycle is cycle and not self.transport.is_closing():
            self._await_head()

    def _await_head(self) -> None:
        self._stop_waiting()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _stop_waiting(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            log.debug("closing %s: no request head in %ss", self.client, self.header_timeout_s)
            # abort, not close: the peer is slow by design, it must not hold the socket any longer.
            self.transport.abort()
