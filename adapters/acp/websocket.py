"""ACP over WebSocket at ``/acp`` (the remote-transport proposal): one JSON-RPC message per
text frame, one agent per socket, sessions shared with every other client through the hub.
``/agents/NAME/acp`` is the same for one of the gateway's agents: every session of the socket
runs on it, and the socket advertises what it takes (adapters/acp/capabilities.py). The ACP
SDK is imported by the first connection (adapters.shared.lazy)."""

from __future__ import annotations

from typing import Any

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ..shared.lazy import LazyModule
from ..shared.ws import origin_allowed, refuse
from .agent import AcpAgent
from .options import AgentOptions
from .rpc import WebSocketTransport

PATH = "/acp"
AGENT_PATH = "/agents/{name}/acp"


def routes(
    service: RunService, limits: EndpointLimits, options: AgentOptions | None = None
) -> list[Any]:
    sdk = LazyModule("loopgate.adapters.acp.server")

    async def acp_socket(websocket: WebSocket) -> None:
        if not origin_allowed(websocket, limits):
            await refuse(websocket, "origin not allowed")
            return
        await websocket.accept()
        transport = WebSocketTransport(
            websocket,
            limits.max_frame_bytes,
            limits.write_timeout_s,
            max_depth=limits.max_json_depth,
        )
        agent_options = options or AgentOptions(
            mcp_transports=("stdio", "http") if limits.client_stdio_mcp else ("http",),
            mcp_outbound=limits.client_outbound,
            agent=websocket.path_params.get("name"),
        )
        server = await sdk.get()
        await server.serve_connection(AcpAgent(service, agent_options, limits), transport)
        await transport.close()

    return [WebSocketRoute(PATH, acp_socket), WebSocketRoute(AGENT_PATH, acp_socket)]
