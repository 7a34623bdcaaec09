"""The Starlette application: the hub, its sources, and every registered adapter's routes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..contracts.limits import EndpointLimits
from ..contracts.refusals import Reason, Refusal
from ..contracts.webhooks import Outbox
from . import health
from .agents.build import build_agents
from .apidocs import routes as apidocs
from .auth import HostGuard, OriginGuard, is_open_path
from .console import routes as console
from .cors import BrowserAccess
from .hub import Hub, Source
from .identity.audit import AccessAudit
from .identity.middleware import Authenticate
from .identity.quotas import build_quotas
from .identity.sources import credential_sources
from .journal import open_journal
from .outbound import outbound_policy
from .reference.types import ModelProvider
from .refusals import Refusals
from .registry import load_adapters
from .run_webhooks import RunWebhooks
from .settings import Settings
from .sources.ingest import IngestSource
from .sources.replay import ReplaySource
from .stall_watchdog import StallWatchdog
from .telemetry import Telemetry, build_telemetry
from .webhooks import WebhookOutbox


def build_hub(
    settings: Settings,
    provider: ModelProvider | None = None,
    *,
    telemetry: Telemetry | None = None,
    loop: Any = None,
) -> Hub:
    """``loop`` plugs a Python loop in (docs/loops.md) in place of the one the settings name."""
    scope = telemetry.scope if telemetry is not None else None
    roster = build_agents(settings, provider, loop, scope=scope)
    sources: dict[str, Source] = {
        "ingest": IngestSource(settings.ingest_idle_timeout_s),
        "replay": ReplaySource(settings.replay_dir, settings.replay_max_gap_s),
    }
    journal = open_journal(
        settings.journal,
        synchronous=settings.journal_synchronous,
        max_events=settings.max_events_per_run,
        max_age_s=settings.max_run_age_s,
        bus=settings.bus,
    )
    hub = Hub(settings, journal, sources, roster=roster)
    loops = ", ".join(agent.loop.name for agent in roster)
    hub.services.append(StallWatchdog(settings.stall_warning_s, loops).run)
    quotas = build_quotas(settings, journal)
    hub.admission.append(quotas.admit)
    hub.services.append(quotas.ledger.serve)
    if telemetry is not None:
        telemetry.attach(hub)
    return hub


@asynccontextmanager
async def traced_hub(settings: Settings, *, loop: Any = None) -> AsyncIterator[Hub]:
    """A running hub with the telemetry the settings and OTEL_* variables ask for (none by
    default), flushed when it stops: what the stdio commands serve from."""
    telemetry = build_telemetry(settings, os.environ)
    try:
        async with build_hub(settings, telemetry=telemetry, loop=loop) as hub:
            yield hub
    finally:
        if telemetry is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(telemetry.shutdown)


def endpoint_limits(settings: Settings, outbox: Outbox | None = None) -> EndpointLimits:
    return EndpointLimits(
        max_body_bytes=settings.max_body_bytes,
        max_line_bytes=settings.max_line_bytes,
        max_frame_bytes=settings.max_frame_bytes,
        keepalive_s=settings.keepalive_s,
        write_timeout_s=settings.write_timeout_s,
        ingest_idle_timeout_s=settings.ingest_idle_timeout_s,
        thread_wait_s=settings.thread_wait_s,
        max_json_depth=settings.max_json_depth,
        max_batch_response_bytes=settings.max_batch_response_bytes,
        allowed_origins=tuple(settings.allowed_origins),
        client_stdio_mcp=settings.acp_remote_stdio_mcp,
        client_outbound=outbound_policy(settings),
        outbox=outbox,
    )


def create_app(
    settings: Settings,
    *,
    hub: Hub | None = None,
    telemetry: Telemetry | None = None,
    loop: Any = None,
) -> Starlette:
    """``telemetry`` (else one built from settings and OTEL_* variables) traces the hub built
    here; a hub passed in keeps whatever telemetry its builder attached. ``loop`` is your own
    loop (an async generator function taking the run context; docs/loops.md)."""
    owned: Telemetry | None = None
    if hub is None:
        if telemetry is None:
            telemetry = owned = build_telemetry(settings, os.environ)
        hub = build_hub(settings, telemetry=telemetry, loop=loop)
    # Webhooks (A2A push notifications, runs' webhooks) go out from jobs of the app's own, not
    # of a request.
    outbox = WebhookOutbox(
        timeout_s=settings.webhook_timeout_s,
        attempts=settings.webhook_attempts,
        backoff_s=settings.webhook_backoff_s,
        max_jobs=settings.webhook_max_jobs,
    )
    webhooks = RunWebhooks(hub, outbox)
    hub.run_observers.append(webhooks.observe)
    hub.end_observers.append(webhooks.ended_elsewhere)
    limits = endpoint_limits(settings, outbox)
    adapters = load_adapters()

    async def http_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        status, path = exc.status_code, request.url.path[:200]
        described: dict[int, tuple[str, Reason]] = {
            404: (f"no endpoint at {request.method} {path}", "no_endpoint"),
            405: (f"{path} does not take {request.method}", "method_not_allowed"),
        }
        detail, reason = described.get(status, (str(exc.detail), "refused"))
        headers = dict(exc.headers or {})
        refusal = Refusal(status=status, detail=detail, reason=reason, headers=headers)
        return refusals.response(request.scope, refusal)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with hub, outbox.running():
                yield
        finally:
            if owned is not None:
                # Flushing blocks on the collector (bounded by the export timeout).
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(owned.shutdown)

    routes = [
        health.route(adapters),
        health.readiness_route(hub.readiness),
        *apidocs.routes(adapters, token=settings.has_credentials, is_open=is_open_path),
        *(console.routes() if settings.console else []),
    ]
    served = [(adapter, adapter.routes(hub, limits)) for adapter in adapters.values()]
    for _, adapter_routes in served:
        routes.extend(adapter_routes)
    # Who words the refusals made before any adapter sees the request (contracts/refusals.py).
    refusals = Refusals(served)
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_problem}
    )
    app.state.hub = hub
    # What traces the hub built here (None: a hub passed in): agents built later use its scope.
    app.state.telemetry = telemetry
    app.state.settings = settings
    sources = credential_sources(settings)
    app.add_middleware(
        Authenticate,
        sources=sources,
        is_open=is_open_path,
        refusals=refusals,
        observe=AccessAudit(),
    )
    app.add_middleware(OriginGuard, limits=limits, refusals=refusals)
    # Outside the token and Origin guards: a browser's preflight carries no token.
    app.add_middleware(BrowserAccess, allowed_origins=settings.allowed_origins)
    if settings.allowed_hosts or not sources:
        # Outermost: a request for another site's name gets nothing, not even a preflight.
        # With a token (a gateway on the network, reached by any name) it is off unless asked.
        app.add_middleware(HostGuard, allowed=settings.allowed_hosts, refusals=refusals)
    return app
