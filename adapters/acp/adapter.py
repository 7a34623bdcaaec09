"""The ACP registry entry: projector, JSON-lines rendering, and ACP over WebSocket at ``/acp``."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from adapters.acp.projector import AcpItem, AcpProjector, to_wire
from contracts.limits import EndpointLimits
from contracts.ports import RunService
from contracts.projector import ProjectorContext

_encode = msgspec.json.Encoder().encode


class AcpAdapter:
    """``contracts.projector.Adapter`` for the Agent Client Protocol (JSON-RPC 2.0, NDJSON)."""

    name: str = "acp"
    framing: Literal["jsonl"] = "jsonl"

    def projector(self, context: ProjectorContext) -> AcpProjector:
        return AcpProjector(context)

    def to_builtins(self, message: AcpItem) -> Any:
        return to_wire(message)

    def render(self, messages: list[AcpItem]) -> bytes:
        return b"".join(_encode(to_wire(m)) + b"\n" for m in messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[Any]:
        from adapters.acp.websocket import routes

        return routes(service, limits)


ADAPTER = AcpAdapter()
