"""``POST /vercel`` (useChat's default transport) and ``GET /vercel/{chat_id}/stream`` (its
reconnect) over HTTP; the same under ``/agents/{name}`` for the agent of that name (``/vercel``
goes to the chat's agent, else the default).

Every POST starts a run with the request's messages as its history, its ``tools`` as client
tools and its chat ``id`` as the run's thread; the answer is that run, as a UI message stream.
A client that leaves before the end (``stop()``) cancels the run. Errors before the stream
opens are problem responses (JSON): the transport shows the body's text as the error's message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts.envelope import Envelope
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunInfo, RunService, StartRun
from ...contracts.projector import ProjectorContext
from ..shared.agents import AGENT_PREFIX, served_agent
from ..shared.body import decode_json, read_body
from ..shared.endpoint import guarded
from ..shared.follow import FollowPolicy, stream_policy
from ..shared.multitask import start_on_thread
from ..shared.projector import CLIENT_TOOLS
from ..shared.stream import ResponseStream, StreamResponse

# Relative, as is adapter.py's import of this module: a file opened at its own path, as editors
# open it, then meets its own class here, not a copy under loopgate.… (docs/plugins.md).
from .adapter import STREAM_HEADERS, VercelAdapter
from .chunks import Chunk
from .projector import MESSAGE_ID
from .request import (
    ChatRequest,
    check,
    client_tools,
    response_message_id,
    run_config,
    to_history,
)

CONSUMER = "vercel"
PROTOCOL = "vercel"
# The run's id, for the rest of loopgate's API (GET /v1/runs/{id}, steer, respond…).
RUN_HEADER = "x-loopgate-run-id"


def routes(adapter: VercelAdapter, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    policy = stream_policy(limits)

    @guarded
    async def chat(request: Request) -> Response:
        agent = await served_agent(service, request.path_params.get("name"))
        raw = await read_body(request, limits.max_body_bytes)
        body = decode_json(raw, ChatRequest, max_depth=limits.max_json_depth)
        check(body)
        # The client sends the whole conversation: nothing of the chat's is added to it.
        info = await start_on_thread(service, start_request(body, request.headers, agent), limits)
        detached = body.loopgate is not None and body.loopgate.detached

        async def cancel() -> None:
            await service.cancel(info.id)

        return stream(adapter, service, info, policy, on_disconnect=None if detached else cancel)

    @guarded
    async def reconnect(request: Request) -> Response:
        """The chat's run still going, from its start (the transport's default replays it);
        204 when there is none, which the transport takes as nothing to resume. The path's
        agent is checked, not matched: the chat's run is the one to resume, whoever runs it."""
        await served_agent(service, request.path_params.get("name"))
        runs = await service.list_runs(limit=1, thread_id=request.path_params["chat_id"])
        if not runs or runs[0].state == "finished":
            return Response(status_code=204)
        return stream(adapter, service, runs[0], policy)

    return [
        Route("/vercel", chat, methods=["POST"]),
        Route("/vercel/{chat_id}/stream", reconnect, methods=["GET"]),
        Route(f"{AGENT_PREFIX}/vercel", chat, methods=["POST"]),
        Route(f"{AGENT_PREFIX}/vercel/{{chat_id}}/stream", reconnect, methods=["GET"]),
    ]


def start_request(body: ChatRequest, headers: Headers, agent: str | None = None) -> StartRun:
    metadata: dict[str, Any] = {"protocol": PROTOCOL}
    continued = response_message_id(body)
    if continued is not None:
        metadata[MESSAGE_ID] = continued
    tools = client_tools(body)
    if tools:  # kept with the run for a reconnect's stream: none when absent
        metadata[CLIENT_TOOLS] = [spec.name for spec in tools]
    ours = body.loopgate
    return StartRun(
        input=to_history(body),
        config=run_config(body),
        thread_id=body.id or None,
        client_tools=tools,
        metadata=metadata,
        approval=(ours.approval if ours is not None else None) or "auto",
        traceparent=headers.get("traceparent"),
        tracestate=headers.get("tracestate"),
        agent=agent,
        multitask_strategy=ours.multitask_strategy if ours is not None else None,
        webhook=ours.webhook if ours is not None else None,
    )


def projector_context(info: RunInfo) -> ProjectorContext:
    """The answer's message id: the continued message's (kept with the run, so that a
    reconnect names the same message), else the run's id; the tools the client runs, for a
    run this endpoint started (another front end's run does not say)."""
    options: dict[str, Any] = {}
    continued = info.metadata.get(MESSAGE_ID)
    if isinstance(continued, str):
        options[MESSAGE_ID] = continued
    if info.metadata.get("protocol") == PROTOCOL:
        named = info.metadata.get(CLIENT_TOOLS)
        options[CLIENT_TOOLS] = named if isinstance(named, list) else []
    return ProjectorContext(run_id=info.id, thread_id=info.thread_id, options=options)


class VercelStream(ResponseStream[Chunk, list[Envelope]]):
    """The run from its first event, as a UI message stream."""

    def __init__(
        self, adapter: VercelAdapter, service: RunService, info: RunInfo, policy: FollowPolicy
    ) -> None:
        projector = adapter.projector(projector_context(info))
        super().__init__(service, info.id, projector, policy, consumer=CONSUMER)
        self.adapter = adapter

    def encode(self, messages: list[Chunk]) -> bytes:
        return self.adapter.render(messages)


def stream(
    adapter: VercelAdapter,
    service: RunService,
    info: RunInfo,
    policy: FollowPolicy,
    on_disconnect: Callable[[], Awaitable[None]] | None = None,
) -> StreamResponse:
    return VercelStream(adapter, service, info, policy).response(
        media_type=adapter.media_type,
        headers={**STREAM_HEADERS, RUN_HEADER: info.id},
        on_disconnect=on_disconnect,
    )
