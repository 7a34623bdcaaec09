"""uvicorn's h11 protocol with deadlines for every request head and body.

uvicorn arms no timer on a fresh connection, and its keep-alive timer is cancelled by the first
byte of the next request: a client that sends a header line now and then (slowloris) holds its
socket forever, and so does one that trickles a body (issue 29: 1,200 sockets sending a byte a
second held the connection cap for as long as they liked). Here:

- the wait for a complete request head — from the moment the connection opens, and again after
  each response — is bounded by ``header_timeout_s``; past it the connection is closed without
  an answer (there is no request to answer yet);
- a request body must arrive whole within ``body_timeout_s`` of its head, with no gap longer
  than ``body_idle_timeout_s``; past either it is answered 408 with a problem body and the
  connection closes. A gap while the application has not taken what came is not the client's
  and does not count. An endpoint whose body is a stream (the NDJSON ingest) lifts the total
  deadline and sets its own gap (``adapters/shared/connection.py``).

The same extension lets a streaming response whose client stopped reading drop the
connection, instead of returning unfinished (which uvicorn logs as an application error).
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from ..adapters.shared.connection import ABORT, STREAM_BODY
from .listener import LINGER_S, problem_bytes
from .log_limits import RateLimitedLog

log = logging.getLogger("loopgate.http")
# What uvicorn logs (WARNING) for every request h11 cannot parse, and for every upgrade to
# something other than a WebSocket (``curl --http2`` asks for h2c): a client can send either as
# fast as it is answered. Each is counted into the server's report instead (kind, words).
COUNTED = {
    "Invalid HTTP request received.": ("malformed", "malformed HTTP requests answered 400"),
    "Unsupported upgrade request.": ("upgrade", "upgrades other than WebSocket ignored"),
}


class _CountedClientLines:
    """uvicorn's logger for one connection, but for its lines about what a client did wrong:
    those are counted into the server's rate-limited report (one line a minute, with the
    count)."""

    def __init__(self, logger: logging.Logger, report: RateLimitedLog) -> None:
        self._logger = logger
        self._report = report

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        counted = COUNTED.get(msg) if isinstance(msg, str) else None
        if counted is not None:
            self._report(*counted)
            return
        self._logger.warning(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


class GuardedH11Protocol(H11Protocol):
    def __init__(
        self,
        *args: Any,
        header_timeout_s: float,
        body_timeout_s: float,
        body_idle_timeout_s: float,
        report: RateLimitedLog,
        last_request: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.logger = cast(logging.Logger, _CountedClientLines(self.logger, report))
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.body_idle_timeout_s = body_idle_timeout_s
        self.report = report
        # Serve one request and close (a health check let in past the connection cap).
        self.last_request = last_request
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_deadline = math.inf
        self._body_idle_s = body_idle_timeout_s
        self._last_byte = 0.0
        self._linger: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self._stop_body()
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._linger is not None:
            return  # answered 408: what the client still sends is read and dropped
        self._last_byte = self.loop.time()
        cycle = self.cycle
        super().data_received(data)
        if self.transport.get_protocol() is not self:  # upgraded to a WebSocket
            self._stop_waiting()
            self._stop_body()
            return
        self._after_events(cycle)

    def on_response_complete(self) -> None:
        cycle = self.cycle
        super().on_response_complete()
        # Unless a pipelined request already started the next cycle, wait for its head anew.
        if self.cycle is cycle and not self.transport.is_closing():
            self._await_head()
        self._after_events(cycle)

    def _after_events(self, previous: RequestResponseCycle | None) -> None:
        if self.cycle is not previous:  # a complete head reached the application
            self._stop_waiting()
            self._request_started(self.cycle)
        if self._body_timer is not None and self.conn.their_state is not h11.SEND_BODY:
            self._stop_body()

    # --- heads --------------------------------------------------------------------------

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

    # --- bodies -------------------------------------------------------------------------

    def _request_started(self, cycle: RequestResponseCycle) -> None:
        scope = cast(dict[str, Any], cycle.scope)
        extensions = scope.setdefault("extensions", {})
        extensions[STREAM_BODY] = lambda idle_s: self._stream_body(cycle, idle_s)
        extensions[ABORT] = lambda: self._abort(cycle)
        if self.last_request:
            cycle.keep_alive = False
        self._stop_body()
        if self.conn.their_state is h11.SEND_BODY:
            self._body_deadline = self.loop.time() + self.body_timeout_s
            self._body_idle_s = self.body_idle_timeout_s
            self._arm_body()

    def _arm_body(self) -> None:
        self._stop_body()
        deadline = min(self._body_deadline, self._last_byte + self._body_idle_s)
        self._body_timer = self.loop.call_at(deadline, self._check_body)

    def _stop_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _stream_body(self, cycle: RequestResponseCycle, idle_s: float) -> None:
        if cycle is self.cycle and self._body_timer is not None:
            self._body_deadline = math.inf
            self._body_idle_s = idle_s
            self._arm_body()

    def _check_body(self) -> None:
        self._body_timer = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        now = self.loop.time()
        if self.flow.read_paused:
            # The application has not taken what came: the client is not the one waiting.
            self._last_byte = now
        if now >= self._body_deadline:
            self._body_late(f"the request body did not arrive within {self.body_timeout_s:g}s")
        elif now >= self._last_byte + self._body_idle_s:
            self._body_late(f"no byte of the request body arrived for {self._body_idle_s:g}s")
        else:
            self._arm_body()

    def _body_late(self, detail: str) -> None:
        cycle = self.cycle
        self.report("body", "a request body too slow: %s; answered 408", detail)
        # The application's receive() now says the client left; what it answers is dropped.
        cycle.disconnected = True
        cycle.message_event.set()
        if cycle.response_started:
            # An answer is already under way (or out): it cannot become a 408.
            self.transport.abort()
            return
        self.transport.write(problem_bytes(408, "Request Timeout", detail))
        self.transport.write_eof()
        # Read on and drop what the client still sends, so that the close does not reset the
        # connection over unread bytes (the client would lose the answer); bounded.
        self.flow.resume_reading()
        self._linger = self.loop.call_later(LINGER_S, self.transport.abort)

    def _abort(self, cycle: RequestResponseCycle) -> None:
        if cycle is self.cycle:
            self.report(
                "abort",
                "dropped a connection whose client stopped reading its response (%s)",
                cycle.scope["path"],
            )
            cycle.disconnected = True  # an unfinished response, on purpose: no error to log
            cycle.message_event.set()
            self.transport.abort()
