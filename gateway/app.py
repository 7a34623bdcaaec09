"""The Starlette application: the hub, its sources, and every registered adapter's routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapters.shared.problem import problem_response
from contracts.limits import EndpointLimits
from gateway.auth import TokenAuth
from gateway.hub import Hub
from gateway.journal import open_journal
from gateway.loop.types import ModelProvider
from gateway.registry import load_adapters
from gateway.settings import Settings
from gateway.sources.ingest import IngestSource
from gateway.sources.loop import LoopSource
from gateway.sources.replay import ReplaySource


def build_hub(settings: Settings, provider: ModelProvider | None = None) -> Hub:
    sources = {
        "loop": LoopSource(settings, provider),
        "ingest": IngestSource(settings.ingest_idle_timeout_s),
        "replay": ReplaySource(settings.replay_dir, settings.replay_max_gap_s),
    }
    return Hub(settings, open_journal(settings.journal), sources)


def endpoint_limits(settings: Settings) -> EndpointLimits:
    return EndpointLimits(
        max_body_bytes=settings.max_body_bytes,
        max_line_bytes=settings.max_line_bytes,
        max_frame_bytes=settings.max_frame_bytes,
        keepalive_s=settings.keepalive_s,
        write_timeout_s=settings.write_timeout_s,
        allowed_origins=tuple(settings.allowed_origins),
    )


def create_app(settings: Settings, *, hub: Hub | None = None) -> Starlette:
    hub = hub or build_hub(settings)
    limits = endpoint_limits(settings)
    adapters = load_adapters()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "adapters": sorted(adapters)})

    async def http_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        detail = {404: f"no endpoint at {request.url.path}", 405: "method not allowed here"}
        return problem_response(exc.status_code, detail.get(exc.status_code, str(exc.detail)))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with hub:
            yield

    routes = [Route("/healthz", healthz)]
    for adapter in adapters.values():
        routes.extend(adapter.routes(hub, limits))
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_problem}
    )
    app.state.hub = hub
    app.state.settings = settings
    if settings.token:
        app.add_middleware(TokenAuth, token=settings.token)
    return app
