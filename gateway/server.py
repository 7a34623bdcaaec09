"""uvicorn, with connections accepted and bounded by loopgate, and a shutdown that ends every
run before connections are closed.

uvicorn waits for open responses before it runs the lifespan shutdown, so without the drain an
open event stream would hold the process until the graceful timeout. Draining the hub first
gives every stream its terminal event and lets it finish on its own.

Connections are accepted by :class:`gateway.listener.Listener` (the cap, the 503 beyond it, fd
exhaustion) and spoken to by :class:`gateway.http_protocol.GuardedH11Protocol` (uvicorn's h11
protocol with deadlines for request heads and bodies) and
:class:`gateway.ws_protocol.GuardedWebSocketProtocol` (uvicorn's WebSocket protocol, taking a
client's bad frames as the client's doing). docs/reliability.md says why this and not another
server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from .app import create_app
from .http_protocol import GuardedH11Protocol
from .hub import Hub
from .identity.audit import route_audit
from .listener import Listener, raise_fd_limit
from .log_limits import RateLimitedLog
from .redaction import install_redaction
from .settings import Settings
from .telemetry import Telemetry
from .ws_protocol import GuardedWebSocketProtocol

log = logging.getLogger("loopgate.server")

# Descriptors the rest of the server needs besides client connections: listening sockets, the
# event loop, journal files, loop and MCP child processes, the trace worker.
FD_RESERVE = 256


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, hub: Hub, settings: Settings | None = None) -> None:
        super().__init__(config)
        self.hub = hub
        # Without settings, the connection bounds are the defaults.
        self.settings = settings or Settings()
        self.listeners: list[Listener] = []
        # What clients' expected trouble (slow bodies, bad frames) costs the log: a line per
        # kind a minute, in uvicorn's log, where it reports connections (--log-level applies).
        self.report = RateLimitedLog(logging.getLogger("uvicorn.error"), logging.INFO)
        # Loaded by uvicorn with the config, and called as a class; every WebSocket shares the
        # report.
        protocol: Any = functools.partial(GuardedWebSocketProtocol, report=self.report)
        config.ws = protocol
        # The signal that stopped the server, if one did: the command exits 128 + its number.
        self.stopped_by: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped_by = sig
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without raising the signal again once the server is done: where asyncio's
        runner then meets it depends on timing, and the exit status was 130 or 0."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await self.lifespan.startup()
        if self.lifespan.should_exit:
            sys.exit(STARTUP_FAILURE)
        settings = self.settings
        limit = raise_fd_limit(settings.max_connections + FD_RESERVE)
        if limit < settings.max_connections + FD_RESERVE:
            log.warning(
                "the file-descriptor limit (%d) leaves less than max_connections (%d) + %d for "
                "the rest of the server: past it, new connections are answered 503",
                limit,
                settings.max_connections,
                FD_RESERVE,
            )

        def protocol(last_request: bool = False) -> asyncio.Protocol:
            return GuardedH11Protocol(
                config=self.config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                header_timeout_s=settings.header_timeout_s,
                body_timeout_s=settings.body_timeout_s,
                body_idle_timeout_s=settings.body_idle_timeout_s,
                report=self.report,
                last_request=last_request,
            )

        try:
            bound = sockets or bind(self.config.host, self.config.port, self.config.backlog)
        except OSError as exc:
            log.error("cannot listen on %s:%s: %s", self.config.host, self.config.port, exc)
            await self.lifespan.shutdown()
            sys.exit(STARTUP_FAILURE)
        for sock in bound:
            listener = Listener(
                sock,
                protocol,
                self.server_state.connections,
                max_connections=settings.max_connections,
                close_grace_s=settings.write_timeout_s,
                health_factory=lambda: protocol(last_request=True),
            )
            listener.start()
            self.listeners.append(listener)
        # uvicorn's shutdown closes these and waits for them, as it would asyncio servers.
        self.servers = self.listeners  # type: ignore[assignment]
        for sock in bound:
            host, port = sock.getsockname()[:2]
            # In uvicorn's own log, where its operators look for it.
            logging.getLogger("uvicorn.error").info(
                "loopgate running on http://%s:%d (Press CTRL+C to quit)",
                f"[{host}]" if ":" in host else host,
                port,
            )
        roster = self.hub.roster
        if roster is not None:
            logging.getLogger("uvicorn.error").info("runs go to %s", roster.summary())
        self.started = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # One grace for the whole stop: the requests still open after the drain (a push
        # waiting on a commit the journal cannot make) get what the drain left of it.
        ends = time.monotonic() + self.settings.shutdown_grace_s
        await self.hub.drain()
        self.config.timeout_graceful_shutdown = max(math.ceil(ends - time.monotonic()), 1)
        await super().shutdown(sockets)


def bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to (as asyncio's create_server)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
    except OSError:
        for sock in bound:
            sock.close()
        raise
    return bound


def make_server(
    settings: Settings, *, log_level: str = "info", telemetry: Telemetry | None = None
) -> GatewayServer:
    """``telemetry``: else one built from the settings and OTEL_* variables (create_app)."""
    settings.check_listening()
    app = create_app(settings, telemetry=telemetry)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        ws_max_size=settings.max_frame_bytes,
        ws_per_message_deflate=settings.ws_compression,
        # Not uvloop, even when installed: under it a WebSocket client that floods and reads
        # nothing was never cut off (tests/hostile/test_floods.py).
        loop="asyncio",
        timeout_graceful_shutdown=int(settings.shutdown_grace_s) + 1,
        # Event streams must never be compressed or buffered; uvicorn does neither.
        proxy_headers=False,
    )
    route_audit(settings.audit_destination)
    # uvicorn configured its loggers just now: their handlers get the filter too.
    install_redaction()
    return GatewayServer(config, app.state.hub, settings)
