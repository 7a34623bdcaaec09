"""``/mcp``: MCP over streamable HTTP, stateless.

Each request is served on its own by the SDK's session manager in stateless mode: no
``Mcp-Session-Id``, no server state between requests, so any gateway process can answer any
request and a client that reconnects loses nothing. A ``tools/call`` of ``run`` answers with
an SSE stream: its progress notifications, then its result. What a stateless server cannot
do, this one does not need: it sends clients no requests of its own, and a standalone GET
stream would carry nothing (GET and DELETE are 405). A client that hangs up on a ``run``
cancels its run.

The gateway's middleware guards the path like every other: the bearer token, the Host check
(DNS rebinding) and the Origin check of every POST, which the MCP transport asks of servers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from loopgate.adapters.shared.lazy import imported
from loopgate.contracts.limits import EndpointLimits

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

PATH = "/mcp"


class McpEndpoint:
    """The ASGI app at ``/mcp``: a session manager per request (it is single-use, and a
    stateless one holds nothing worth keeping). The SDK and the server are loaded by the
    first request (adapters.shared.lazy)."""

    def __init__(self, build: Callable[[], Server[Any]], limits: EndpointLimits) -> None:
        self._build = build
        self._server: Server[Any] | None = None
        self._lock = anyio.Lock()
        self.limits = limits

    async def _loaded(self) -> Server[Any]:
        async with self._lock:
            if self._server is None:
                await imported("loopgate.adapters.mcp.server")
                self._server = self._build()
        return self._server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = self._server if self._server is not None else await self._loaded()
        sdk = await imported("mcp.server.streamable_http_manager")
        manager = sdk.StreamableHTTPSessionManager(
            app=server,
            stateless=True,
            max_request_body_size=self.limits.max_body_bytes,
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)


def routes(build: Callable[[], Server[Any]], limits: EndpointLimits) -> list[BaseRoute]:
    """``build`` makes the MCP server, on the first request."""
    # POST only: GET (a stream for messages the server sends unprompted) and DELETE (a
    # session's end) are 405, as the transport allows a server that has neither.
    return [Route(PATH, McpEndpoint(build, limits), methods=["POST"])]
