"""Registry entry of the native SSE adapter."""

from __future__ import annotations

from typing import Any

import msgspec

from contracts.envelope import Envelope
from contracts.limits import EndpointLimits
from contracts.ports import RunService
from contracts.projector import ProjectorContext


class SseAdapter:
    name = "sse"
    framing = "sse"

    def projector(self, context: ProjectorContext) -> Any:
        from adapters.sse.projector import SseProjector

        return SseProjector(context)

    def to_builtins(self, message: Envelope) -> Any:
        return msgspec.to_builtins(message)

    def render(self, messages: list[Envelope]) -> bytes:
        from adapters.sse.projector import render_events

        return render_events(messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[Any]:
        from adapters.sse.api import routes

        return routes(service, limits)


ADAPTER = SseAdapter()
