"""The ACP registry entry: projector, JSON-lines rendering, ACP over WebSocket at ``/acp``, and
the agent on stdin/stdout (``loopgate acp``)."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext, ReadBytes, StdioOptions, WriteBytes
from .projector import AcpItem, AcpProjector, to_wire

_encode = msgspec.json.Encoder().encode


class AcpAdapter:
    """``contracts.projector.Adapter`` for the Agent Client Protocol (JSON-RPC 2.0, NDJSON)."""

    name: str = "acp"

    def projector(self, context: ProjectorContext) -> AcpProjector:
        return AcpProjector(context)

    def to_builtins(self, message: AcpItem) -> Any:
        return to_wire(message)

    def render(self, messages: list[AcpItem]) -> bytes:
        return b"".join(_encode(to_wire(m)) + b"\n" for m in messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .websocket import routes

        return routes(service, limits)

    async def serve_stdio(
        self, service: RunService, options: StdioOptions, read: ReadBytes, write: WriteBytes
    ) -> None:
        """One IDE on stdin/stdout. ``options.options`` are :class:`AgentOptions` fields
        (``context_size``, ``tool_kinds``, ``mcp_transports``…); a line is at most
        ``limits.max_line_bytes``."""
        from .agent import AcpAgent
        from .options import AgentOptions
        from .rpc import NdjsonTransport
        from .server import serve_connection

        agent_options = msgspec.convert(
            {"version": options.version, "default_cwd": options.cwd, **options.options},
            AgentOptions,
        )
        limits = options.limits
        transport = NdjsonTransport(
            read, write, limits.max_line_bytes, max_depth=limits.max_json_depth
        )
        await serve_connection(AcpAgent(service, agent_options, limits), transport)


ADAPTER = AcpAdapter()
