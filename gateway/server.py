"""uvicorn, with a shutdown that ends every run before connections are closed.

uvicorn waits for open responses before it runs the lifespan shutdown, so without this an
open event stream would hold the process until the graceful timeout. Draining the hub first
gives every stream its terminal event and lets it finish on its own.
"""

from __future__ import annotations

import logging
import socket

import uvicorn

from gateway.app import create_app
from gateway.hub import Hub
from gateway.settings import Settings

log = logging.getLogger("loopgate")


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, hub: Hub) -> None:
        super().__init__(config)
        self.hub = hub

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.hub.drain()
        await super().shutdown(sockets)


def make_server(settings: Settings, *, log_level: str = "info") -> GatewayServer:
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        ws_max_size=settings.max_frame_bytes,
        timeout_graceful_shutdown=int(settings.shutdown_grace_s) + 1,
        # Event streams must never be compressed or buffered; uvicorn does neither.
        proxy_headers=False,
    )
    return GatewayServer(config, app.state.hub)
