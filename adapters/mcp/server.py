"""The MCP server: the official ``mcp`` SDK's low-level ``Server`` with loopgate's handlers.

The SDK does the protocol (the handshake or the 2026 per-request envelope, version
negotiation, the schema checks of every request, ids, cancellation); the handlers here map
it onto runs (:mod:`adapters.mcp.calls`, :mod:`adapters.mcp.resources`). Error policy: a
tool's refusal or bad arguments are a tool error (``isError``: the caller's model reads it and
can correct the call); an unknown tool or resource is -32602; an unexpected exception is
logged, and the client gets a message that says so and nothing of it (the SDK would send the
exception's text).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunNotFound, RunService
from . import resources
from .agents import Menu
from .calls import (
    INTERNAL,
    Calls,
    Delivered,
    SendProgress,
    Trace,
    refusal,
    text_result,
    trace_of,
)
from .projector import Progress, progress_params
from .sessions import run_id_for, session_of
from .tools import (
    CANCEL_RUN,
    GET_RUN,
    LIST_RUNS,
    TOOLS,
    ArgumentError,
    parse_arguments,
)

log = logging.getLogger("loopgate.mcp")
# A server built without the gateway's limits (a test's): the default wait for a thread.
NO_LIMITS = EndpointLimits()

NAME = "loopgate"
INSTRUCTIONS = (
    "loopgate runs an agent loop. Call `run` with a prompt to run it: progress notifications "
    "show each step, the result is its answer. A run that asks a question returns it; answer "
    "with another `run` on the same thread_id. `get_run`, `list_runs` and `cancel_run` manage "
    "runs; each run's event log is the resource loopgate://runs/{run_id}/events."
)
UNEXPECTED = "internal error; the gateway's log has the details"
# How long a call's result waits for the client's answer to the ping that follows its
# progress (a client answers at once; one that never does costs each result this long).
PING_TIMEOUT_S = 5.0
_Context = ServerRequestContext[Any, Any]


def progress_token(params: Mapping[str, Any] | None) -> str | int | None:
    """``params._meta.progressToken``: the caller asked for progress notifications."""
    meta = params.get("_meta") if params else None
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def _http_headers(ctx: _Context) -> Mapping[str, str] | None:
    headers = getattr(ctx.request, "headers", None)
    return headers if isinstance(headers, Mapping) else None


def _client_metadata(ctx: _Context, tool: str) -> dict[str, Any]:
    """What the run records about who started it (and with which tool)."""
    client = ctx.session.client_params
    info = client.client_info if client is not None else None
    mcp: dict[str, Any] = {"tool": tool}
    if info is not None:
        mcp["client"] = f"{info.name} {info.version}".strip()
    return {"mcp": mcp}


def build_server(
    service: RunService, version: str, limits: EndpointLimits = NO_LIMITS
) -> Server[Any]:
    """One server for every connection to ``service`` (it holds no connection's state)."""
    calls = Calls(service, limits)
    single = types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])
    templates = types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate.model_validate(resources.template())]
    )

    async def menu() -> Menu:
        """The tools for the agents served now (a reload may change them)."""
        try:
            return Menu(await service.agents())
        except Exception as exc:
            # A gateway out of reach (--server): its runs fail with words of their own.
            if refusal(exc) is None:
                log.exception("MCP could not list the agents")
            return Menu([])

    async def list_tools(
        ctx: _Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        offered = await menu()
        if not offered.several:
            return single
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in offered.tools])

    data_tools: dict[str, Callable[[Any], Awaitable[dict[str, Any]]]] = {
        GET_RUN: calls.get_run,
        LIST_RUNS: calls.list_runs,
        CANCEL_RUN: calls.cancel_run,
    }

    async def call_tool(ctx: _Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        data = data_tools.get(name)
        runner = None if data is not None else (await menu()).runner(name)
        if data is None and runner is None:
            raise MCPError(
                types.INVALID_PARAMS, f"Unknown tool: {name!r}; tools/list lists the tools"
            )
        try:
            if runner is None:
                assert data is not None
                body = await data(parse_arguments(name, params.arguments))
            else:
                args = parse_arguments(name, params.arguments, runner.args)
                body = await calls.run(
                    args,
                    _progress_sender(ctx),
                    trace=trace_of(_meta(ctx), _http_headers(ctx)),
                    metadata=_client_metadata(ctx, name),
                    run_id=_run_id(ctx),
                    delivered=_delivered(ctx),
                    agent=runner.agent_of(args),
                    tell_agent=runner.tells,
                    webhook=_webhook(ctx),
                )
        except ArgumentError as exc:
            body = text_result(exc.message, error=True)
        except Exception as exc:
            said = refusal(exc)
            if said is None:
                log.exception("MCP tool %s failed", name)
            body = text_result(said or INTERNAL, error=True)
        return types.CallToolResult.model_validate(body)

    async def list_resources(
        ctx: _Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        try:
            listed = await resources.list_logs(service)
        except Exception as exc:
            raise _failure(exc, "resources/list") from None
        return types.ListResourcesResult(
            resources=[types.Resource.model_validate(r) for r in listed]
        )

    async def list_templates(
        ctx: _Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return templates

    async def read_resource(
        ctx: _Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            run_id = resources.run_of(uri)
        except resources.NotARunLog:
            raise MCPError(
                types.INVALID_PARAMS,
                f"Resource not found: {uri[:200]!r} is not a run's event log "
                f"({resources.TEMPLATE})",
                {"uri": uri},
            ) from None
        try:
            text = (await resources.read_log(service, run_id)).decode()
        except Exception as exc:
            raise _failure(exc, "resources/read", uri) from None
        contents = types.TextResourceContents(uri=uri, mime_type=resources.MIME_TYPE, text=text)
        return types.ReadResourceResult(contents=[contents])

    server: Server[Any] = Server(
        NAME,
        version=version,
        title="loopgate",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    # The SDK's own span per MCP message would be a second trace beside the gateway's, which
    # traces every run already (docs/telemetry.md).
    server.middleware = []
    return server


def _run_id(ctx: _Context) -> str | None:
    """The id a ``run`` called in an HTTP session starts its run with, so that a
    cancellation of the call reaches the run from any instance (:mod:`.sessions`)."""
    headers = _http_headers(ctx)
    session = session_of(headers) if headers is not None else None
    if session is None or ctx.request_id is None:
        return None
    return run_id_for(session, ctx.request_id)


def _meta(ctx: _Context) -> Mapping[str, Any] | None:
    meta = ctx.params.get("_meta") if ctx.params else None
    return meta if isinstance(meta, Mapping) else None


def _webhook(ctx: _Context) -> str | None:
    """``params._meta.loopgate.webhook`` of a tools/call: told of the run's end. In ``_meta``,
    not the arguments: the client program names it, never the model that writes arguments."""
    ours = (_meta(ctx) or {}).get("loopgate")
    url = ours.get("webhook") if isinstance(ours, Mapping) else None
    if url is None or isinstance(url, str):
        return url
    raise ArgumentError("invalid _meta.loopgate.webhook: a URL string")


def _progress_sender(ctx: _Context) -> SendProgress | None:
    """Sends a progress item as ``notifications/progress`` on the call's own channel (over
    streamable HTTP: its response stream); None when the caller gave no progress token."""
    token = progress_token(ctx.params)
    if token is None:
        return None
    session, request_id = ctx.session, ctx.request_id

    async def send(item: Progress) -> None:
        params = types.ProgressNotificationParams.model_validate(progress_params(item, token))
        await session.send_notification(
            types.ProgressNotification(params=params), related_request_id=request_id
        )

    return send


def _delivered(ctx: _Context) -> Delivered | None:
    """A ping to the client, answered once it has handled what came before it: a client
    reads messages in order, so its pong says every progress notification was handled.
    None where the server cannot send requests (stateless HTTP: each SSE event is handled
    before the next is read, so nothing needs waiting for there)."""
    session = ctx.session
    if not session.can_send_request:
        return None

    async def delivered() -> None:
        # An error (a refusal, or the client's input ended) is as good an answer.
        with anyio.move_on_after(PING_TIMEOUT_S), suppress(MCPError):
            await session.send_ping()

    return delivered


def _failure(exc: Exception, method: str, uri: str | None = None) -> MCPError:
    """The error a resource request gets: a run not kept is -32602, as the SDK's own servers
    answer a missing resource; a refusal says why; anything else only that it failed."""
    said = refusal(exc)
    if said is None:
        log.exception("MCP %s failed", method)
        return MCPError(types.INTERNAL_ERROR, UNEXPECTED)
    if isinstance(exc, RunNotFound) and uri is not None:
        return MCPError(types.INVALID_PARAMS, f"Resource not found: {said}", {"uri": uri})
    return MCPError(types.INTERNAL_ERROR, said)


__all__ = ["INSTRUCTIONS", "NAME", "Trace", "build_server", "progress_token"]
