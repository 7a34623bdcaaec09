"""Accepting connections: the connection cap, the 503 beyond it, file-descriptor exhaustion, and
connections that never take their last bytes.

asyncio's own accept loop (``loop.create_server``, CPython 3.11) handles EMFILE by logging a
traceback and scheduling a retry — and then goes on trying ``backlog`` more times in the same
tick: at the fd limit the server spins and writes thousands of tracebacks a second. This loop
accepts with the public socket API instead and decides per connection:

- below ``max_connections``: served;
- at the cap: its request head is read (≤ 1 s, ≤ 8 KiB). A health check (``GET /healthz``) is
  served, that one request, so that an orchestrator does not restart a server that is merely
  full; anything else gets a 503 problem response, then the socket lingers ≤ 1 s so the client
  reads it (closing over unread request bytes would reset the connection and lose the answer).
  At most ``max_connections / 10`` such connections are open at once: beyond, the oldest goes;
- out of file descriptors: the spare descriptor kept for this moment is given up to accept the
  waiting client, answer it 503 and close it at once; one warning per minute at most.

A connection the server has closed but whose peer does not take the remaining bytes (a client
that stopped reading) would otherwise hold its socket for as long as the peer keeps its TCP
window shut; past ``close_grace_s`` it is aborted.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
import time
from collections.abc import Callable, Collection
from typing import Any, cast

import anyio
import h11

from ..adapters.shared.problem import problem_body
from . import health
from .log_limits import RateLimitedLog

log = logging.getLogger("loopgate.server")

EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
LINGER_S = 1.0
# A refused connection's request head: how long and how big, at most (a health check's is tiny).
HEAD_WAIT_S = 1.0
HEAD_LIMIT = 8192
HEALTH = health.PATH.encode()
# Accepts handled before letting the rest of the server run.
ACCEPT_BURST = 64
SWEEP_EVERY_S = 1.0


def problem_bytes(status: int, reason: str, detail: str, *, retry_after: bool = False) -> bytes:
    """A whole HTTP/1.1 response with a problem body, after which the connection closes."""
    body = problem_body(status, detail)
    retry = "retry-after: 1\r\n" if retry_after else ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n{retry}connection: close\r\n\r\n"
    )
    return head.encode() + body


BUSY = problem_bytes(
    503, "Service Unavailable", "too many open connections; try again shortly", retry_after=True
)
NO_FDS = problem_bytes(
    503, "Service Unavailable", "the server is out of file descriptors", retry_after=True
)


def is_health_check(request: h11.Request) -> bool:
    return request.method in (b"GET", b"HEAD") and request.target.partition(b"?")[0] == HEALTH


class _Refusal(asyncio.Protocol):
    """A connection past the cap. Its request head is read (within ``HEAD_WAIT_S``, at most
    ``HEAD_LIMIT`` bytes): a health check is handed to the server for that one request;
    anything else is answered 503 at once, and then what the client still sends is read and
    dropped until its EOF or ``LINGER_S``. Counted in ``refusing`` until then."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.parser = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        self.head = bytearray()
        self.answered = False
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though uvloop's does not subclass asyncio's: no isinstance.
        self.transport = cast(asyncio.Transport, transport)
        self.listener._refusing[self] = None
        self.timer = asyncio.get_running_loop().call_later(HEAD_WAIT_S, self._refuse)

    def data_received(self, data: bytes) -> None:
        if self.answered:
            return
        self.head += data
        try:
            self.parser.receive_data(data)
            event = self.parser.next_event()
        except h11.RemoteProtocolError:
            event = None
        if event is h11.NEED_DATA:
            return
        if isinstance(event, h11.Request) and is_health_check(event):
            health = self.listener.health_protocol()
            if health is not None:
                self._hand_over(health)
                return
        self._refuse()

    def _refuse(self) -> None:
        assert self.transport is not None
        if self.timer is not None:
            self.timer.cancel()
        self.answered = True
        self.transport.write(BUSY)
        self.timer = asyncio.get_running_loop().call_later(LINGER_S, self.transport.abort)

    def _hand_over(self, protocol: asyncio.Protocol) -> None:
        assert self.transport is not None
        self._forget()
        self.answered = True
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        protocol.data_received(bytes(self.head))

    def evict(self) -> None:
        assert self.transport is not None
        self._forget()
        if not self.answered:
            self.answered = True
            self.transport.write(BUSY)  # to the socket at once: its buffer is empty
        self.transport.abort()

    def eof_received(self) -> bool:
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()

    def _forget(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.listener._refusing.pop(self, None)


class Listener:
    """Serves one listening socket; ``close`` and ``wait_closed`` as ``asyncio.Server``'s."""

    def __init__(
        self,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        connections: Collection[object],
        *,
        max_connections: int,
        close_grace_s: float,
        health_factory: Callable[[], asyncio.Protocol] | None = None,
    ) -> None:
        self.sock = sock
        self.protocol_factory = protocol_factory
        # The server's protocol for one request, then closed: a health check past the cap.
        self.health_factory = health_factory
        self.connections = connections  # uvicorn's: HTTP and WebSocket protocols alike
        self.max_connections = max_connections
        # Refusals open at once; beyond, the oldest is answered if it was not yet and closed,
        # so that a flood of refused clients cannot keep a health check from being read.
        self.max_refusing = max(16, max_connections // 10)
        self.close_grace_s = close_grace_s
        self.refused = 0
        self.dropped = 0
        self._refusing: dict[_Refusal, None] = {}  # oldest first
        self._starting: set[asyncio.Task[object]] = set()
        # Of those, the ones admitted below the cap (refusals do not count towards it).
        self._admitting: set[asyncio.Task[object]] = set()
        self._transports: dict[asyncio.BaseTransport, float | None] = {}
        self._spare: int | None = _open_spare()
        self._report = RateLimitedLog(log)
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def open_connections(self) -> int:
        return len(self.connections) + len(self._admitting)

    def health_protocol(self) -> asyncio.Protocol | None:
        """A protocol for a health check past the cap, while such checks are few (at most
        ``max_refusing`` beyond the cap)."""
        if self.health_factory is None:
            return None
        if len(self.connections) >= self.max_connections + self.max_refusing:
            return None
        return self.health_factory()

    def start(self) -> None:
        self.sock.setblocking(False)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._accept()), loop.create_task(self._sweep())]

    def close(self) -> None:
        """Stop accepting (the sweep goes on until ``wait_closed``)."""
        if self._tasks:
            self._tasks[0].cancel()
        self.sock.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None

    async def wait_closed(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- accepting ------------------------------------------------------------------------

    async def _accept(self) -> None:
        burst = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                burst = 0
                await anyio.wait_readable(self.sock)
                continue
            except OSError as exc:
                await self._accept_failed(exc)
                continue
            self._admit(conn)
            burst += 1
            if burst >= ACCEPT_BURST:
                burst = 0
                await asyncio.sleep(0)

    def _admit(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        if self.open_connections < self.max_connections:
            self._connect(conn, self.protocol_factory, admitted=True)
            return
        self.refused += 1
        self._report(
            "cap",
            "%d connections open, the maximum: answering new ones 503",
            self.max_connections,
        )
        if len(self._refusing) >= self.max_refusing:
            next(iter(self._refusing)).evict()
        self._connect(conn, lambda: _Refusal(self), admitted=False)

    def _connect(
        self, conn: socket.socket, factory: Callable[[], asyncio.Protocol], admitted: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        task = loop.create_task(loop.connect_accepted_socket(factory, conn))
        self._starting.add(task)
        if admitted:
            self._admitting.add(task)
        task.add_done_callback(self._started)

    def _started(self, task: asyncio.Task[object]) -> None:
        self._starting.discard(task)
        self._admitting.discard(task)
        if task.cancelled() or task.exception() is not None:
            return  # the client left before its transport was set up
        result: Any = task.result()
        self._transports[result[0]] = None  # (transport, protocol)

    async def _accept_failed(self, exc: OSError) -> None:
        if exc.errno not in EXHAUSTED:
            # ECONNABORTED, EPROTO, EPERM (a firewall): that client only. The pause keeps an
            # error that repeats from turning into a busy loop.
            log.debug("accept failed: %s", exc)
            await asyncio.sleep(0.01)
            return
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self._report(
            "fds",
            "out of file descriptors (limit %d, %d connections open): answering new "
            "connections 503 until some close",
            limit,
            self.open_connections,
        )
        if self._spare is None:
            self._spare = _open_spare()
            # Not even the spare: wait for descriptors to come back rather than retry at once.
            await asyncio.sleep(0.1)
            return
        os.close(self._spare)
        self._spare = None
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            # Linux answers EMFILE before it looks at the queue: nobody may be waiting at all.
            self._spare = _open_spare()
            await anyio.wait_readable(self.sock)
            return
        except OSError:
            # The freed descriptor went elsewhere (another thread): pause, as without a spare.
            self._spare = _open_spare()
            await asyncio.sleep(0.1)
            return
        self.dropped += 1
        _answer_and_close(conn, NO_FDS)
        self._spare = _open_spare()
        await asyncio.sleep(0)

    # --- closing the ones that will not go ------------------------------------------------

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            now = time.monotonic()
            for transport, since in list(self._transports.items()):
                if not transport.is_closing():
                    continue
                if transport.get_write_buffer_size() == 0:  # type: ignore[attr-defined]
                    del self._transports[transport]  # closed, or about to be
                elif since is None:
                    self._transports[transport] = now
                elif now - since >= self.close_grace_s:
                    log.debug("aborting a closed connection whose peer takes no bytes")
                    transport.abort()  # type: ignore[attr-defined]
                    del self._transports[transport]


def _answer_and_close(conn: socket.socket, response: bytes) -> None:
    """Best effort, never blocking: what the client already sent is read first, so that closing
    does not reset the connection over unread bytes."""
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            conn.recv(65536)
        conn.send(response)
    conn.close()


def _open_spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards ``wanted`` (never above the hard limit);
    returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted if soft == resource.RLIM_INFINITY else soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft
