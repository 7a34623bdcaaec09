"""The MCP registry entry: projector, JSON-lines rendering, ``/mcp`` (streamable HTTP) and the
server on stdin/stdout (``loopgate mcp``)."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from loopgate import __version__

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext, ReadBytes, StdioOptions, WriteBytes
from .projector import McpItem, McpProjector, to_wire

_encode = msgspec.json.Encoder().encode


class McpAdapter:
    """``contracts.projector.Adapter`` for the Model Context Protocol: runs as MCP tools
    (``run`` streams progress notifications, then answers), their event logs as resources."""

    name: str = "mcp"

    def projector(self, context: ProjectorContext) -> McpProjector:
        return McpProjector(context)

    def to_builtins(self, message: McpItem) -> Any:
        return to_wire(message)

    def render(self, messages: list[McpItem]) -> bytes:
        """One JSON-RPC message per line, as ``loopgate mcp`` writes them."""
        return b"".join(_encode(to_wire(m)) + b"\n" for m in messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .http import routes

        def build() -> Any:
            from .server import build_server

            return build_server(service, __version__, limits)

        return routes(build, service, limits)

    async def serve_stdio(
        self, service: RunService, options: StdioOptions, read: ReadBytes, write: WriteBytes
    ) -> None:
        """One client on stdin/stdout until its input ends and its calls are answered; a line
        is at most ``limits.max_line_bytes``."""
        from .server import build_server
        from .stdio import serve_lines

        server = build_server(service, options.version, options.limits)
        await serve_lines(server, read, write, options.limits)


ADAPTER = McpAdapter()
