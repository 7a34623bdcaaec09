"""Registry entry of the native API: the envelope stream as it is, and the REST API around it."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.routing import BaseRoute

from ...contracts.envelope import Envelope
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ...contracts.projector import ProjectorContext
from .projector import NativeProjector, render_events


class NativeAdapter:
    """``contracts.projector.Adapter`` of loopgate's own API: runs over HTTP and WebSocket,
    their events as native SSE (``loopgate replay --adapter native``; ``sse`` is an alias)."""

    name = "native"
    # contracts.refusals.ClaimsPaths: its own paths under OpenAI's /v1 keep problem bodies,
    # known endpoints or not.
    refusal_prefixes: tuple[str, ...] = (
        "/v1/runs",
        "/v1/threads",
        "/v1/contract",
        "/v1/loop",
        "/v1/me",
    )

    def projector(self, context: ProjectorContext) -> NativeProjector:
        return NativeProjector(context)

    def to_builtins(self, message: Envelope) -> Any:
        return msgspec.to_builtins(message)

    def render(self, messages: list[Envelope]) -> bytes:
        return render_events(messages)

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        from . import events, ingest, loop, me, runs, threads

        return [
            *runs.routes(service, limits),
            *threads.routes(service, limits),
            *events.routes(self, service, limits),
            *ingest.routes(service, limits),
            *loop.routes(service),
            *me.routes(),
        ]

    def openapi(self) -> dict[str, Any]:
        from .openapi import describe

        return describe()


ADAPTER = NativeAdapter()
