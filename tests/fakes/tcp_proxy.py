"""A TCP forwarder in front of one server, which can lose its connections the way a rebooted
host (or a load balancer that dropped its state) does: no FIN reaches the clients, and the
first bytes each client sends on an old connection are answered with a reset. Connections
made after that are forwarded as usual.

A server process that dies on this machine closes its sockets, and the client library sees
that before it reuses a connection; across a network it often sees nothing until it writes.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
from contextlib import suppress

from tests.gateway.harness import free_port

POLL_S = 0.05
CHUNK = 65536


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.stale = False
        self.closed = False


class StaleningProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def lose_connections(self) -> int:
        """Every connection open now goes stale: its server side is dropped, its client side
        left open until the client writes to it (then reset). Returns how many."""
        with self._lock:
            pairs = [p for p in self._pairs if not p.stale]
            for pair in pairs:
                pair.stale = True
        return len(pairs)

    def __enter__(self) -> StaleningProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        with self._lock:
            for pair in list(self._pairs):
                _close(pair)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _reset(client)
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair: _Pair) -> None:
        try:
            while not pair.closed and not self._stopped.is_set():
                if pair.stale:
                    with suppress(OSError):
                        pair.server.close()
                    # Silent until the client writes: then it meets a host that knows it not.
                    readable, _, _ = select.select([pair.client], [], [], POLL_S)
                    if readable:
                        _reset(pair.client)
                        pair.closed = True
                    continue
                readable, _, _ = select.select([pair.client, pair.server], [], [], POLL_S)
                for sock in readable:
                    if pair.stale:
                        break
                    data = sock.recv(CHUNK)
                    other = pair.server if sock is pair.client else pair.client
                    if not data:
                        _close(pair)
                        return
                    other.sendall(data)
        except OSError:
            _close(pair)
        finally:
            with self._lock:
                self._pairs.discard(pair)


def _reset(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def _close(pair: _Pair) -> None:
    pair.closed = True
    for sock in (pair.client, pair.server):
        with suppress(OSError):
            sock.close()
