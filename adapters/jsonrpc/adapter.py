"""Registry entry of the JSON-RPC 2.0 adapter: projector, JSON-lines rendering, routes, stdio."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext, ReadBytes, StdioOptions, WriteBytes
from .projector import JsonRpcProjector
from .protocol import Notification

_encode = msgspec.json.Encoder().encode


class JsonRpcAdapter:
    """``contracts.projector.Adapter`` for JSON-RPC 2.0 over HTTP, WebSocket and stdio.

    The keyword arguments override :class:`adapters.jsonrpc.limits.RpcLimits` (``max_batch``,
    ``max_subscriptions``, ``max_pending_requests``…): register your own instance under the
    ``loopgate.adapters`` entry-point group to change them for a server. Over stdio the
    command's ``StdioOptions.options`` override them in turn (``loopgate rpc --max-batch``).
    """

    name: str = "jsonrpc"

    def __init__(self, **limit_overrides: int | float) -> None:
        self.limit_overrides = limit_overrides

    def projector(self, context: ProjectorContext) -> JsonRpcProjector:
        return JsonRpcProjector(context)

    def to_builtins(self, message: Notification) -> Any:
        return msgspec.to_builtins(message)

    def render(self, messages: list[Notification]) -> bytes:
        """One JSON message per line: what a stdio client reads (a WebSocket sends each line's
        JSON as one text frame)."""
        return b"".join(_encode(m) + b"\n" for m in messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from .dispatch import Dispatcher
        from .http import routes
        from .limits import RpcLimits

        rpc_limits = RpcLimits.from_endpoint(limits, **self.limit_overrides)
        return routes(Dispatcher(service, rpc_limits, start_limits=limits), limits)

    async def serve_stdio(
        self, service: RunService, options: StdioOptions, read: ReadBytes, write: WriteBytes
    ) -> None:
        """One connection on stdin/stdout: a message is a line of at most
        ``limits.max_line_bytes``."""
        from .dispatch import Dispatcher
        from .limits import RpcLimits
        from .stdio import serve_lines

        rpc_limits = RpcLimits.from_stdio(
            options.limits, **{**self.limit_overrides, **options.options}
        )
        dispatcher = Dispatcher(service, rpc_limits, start_limits=options.limits)
        await serve_lines(dispatcher, read, write)


ADAPTER = JsonRpcAdapter()
