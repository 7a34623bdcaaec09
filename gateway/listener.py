"""Accepting connections: the connection cap, the 503 beyond it, file-descriptor exhaustion, and
connections that never take their last bytes.

asyncio's own accept loop (``loop.create_server``, CPython 3.11) handles EMFILE by logging a
traceback and scheduling a retry — and then goes on trying ``backlog`` more times in the same
tick: at the fd limit the server spins and writes thousands of tracebacks a second. This loop
accepts with the public socket API instead and decides per connection:

- below ``max_connections``: served;
- at the cap: a 503 problem response, then the socket lingers ≤ 1 s so the client reads it
  (closing over unread request bytes would reset the connection and lose the answer);
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

from loopgate.adapters.shared.problem import problem_body

log = logging.getLogger("loopgate.server")

EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
LINGER_S = 1.0
# Accepts handled before letting the rest of the server run.
ACCEPT_BURST = 64
REPORT_EVERY_S = 60.0
SWEEP_EVERY_S = 1.0


def _response(status: int, reason: str, detail: str) -> bytes:
    body = problem_body(status, detail)
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


BUSY = _response(503, "Service Unavailable", "too many open connections; try again shortly")
NO_FDS = _response(503, "Service Unavailable", "the server is out of file descriptors")


class _Refusal(asyncio.Protocol):
    """Answers 503 at once, reads and drops what the client sends, closes on its EOF or after
    ``LINGER_S``. Counted in ``refusing`` while it lingers."""

    def __init__(self, refusing: set[_Refusal]) -> None:
        self.refusing = refusing
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though uvloop's does not subclass asyncio's: no isinstance.
        stream = cast(asyncio.Transport, transport)
        self.refusing.add(self)
        stream.write(BUSY)
        self.timer = asyncio.get_running_loop().call_later(LINGER_S, stream.abort)

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.refusing.discard(self)


class _Reporter:
    """One log line per kind of trouble per ``REPORT_EVERY_S``, with how often it happened."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def __call__(self, kind: str, message: str, *args: object) -> None:
        self.count[kind] = self.count.get(kind, 0) + 1
        now = time.monotonic()
        if now - self.last.get(kind, -REPORT_EVERY_S) >= REPORT_EVERY_S:
            log.warning(message + " (%d since the last report)", *args, self.count[kind])
            self.last[kind] = now
            self.count[kind] = 0


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
    ) -> None:
        self.sock = sock
        self.protocol_factory = protocol_factory
        self.connections = connections  # uvicorn's: HTTP and WebSocket protocols alike
        self.max_connections = max_connections
        # Refusals lingering at once; beyond, a refused client is closed without waiting.
        self.max_refusing = max(16, max_connections // 10)
        self.close_grace_s = close_grace_s
        self.refused = 0
        self.dropped = 0
        self._refusing: set[_Refusal] = set()
        self._starting: set[asyncio.Task[object]] = set()
        self._transports: dict[asyncio.BaseTransport, float | None] = {}
        self._spare: int | None = _open_spare()
        self._report = _Reporter()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def open_connections(self) -> int:
        return len(self.connections) + len(self._starting)

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
            self._connect(conn, self.protocol_factory)
            return
        self.refused += 1
        self._report(
            "cap",
            "%d connections open, the maximum: answering new ones 503",
            self.max_connections,
        )
        if len(self._refusing) < self.max_refusing:
            self._connect(conn, lambda: _Refusal(self._refusing))
        else:
            _answer_and_close(conn, BUSY)

    def _connect(self, conn: socket.socket, factory: Callable[[], asyncio.Protocol]) -> None:
        loop = asyncio.get_running_loop()
        task = loop.create_task(loop.connect_accepted_socket(factory, conn))
        self._starting.add(task)
        task.add_done_callback(self._started)

    def _started(self, task: asyncio.Task[object]) -> None:
        self._starting.discard(task)
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
