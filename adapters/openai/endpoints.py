"""``POST /v1/chat/completions`` (streamed or not) and ``GET /v1/models`` over HTTP.

Every request starts a run with the request's messages as its history and its tools as client
tools; the answer is that run, projected. A client that leaves before the end cancels it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts import json_input
from ...contracts.envelope import Envelope
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunInfo, RunService, StartRun
from ...contracts.projector import ProjectorContext
from ..shared.body import read_body
from ..shared.follow import CONNECTION, EventStream, FollowPolicy, stream_policy
from ..shared.multitask import start_on_thread
from ..shared.projector import CLIENT_TOOLS
from ..shared.stream import ResponseStream

# Relative, as is adapter.py's import of this module: a file opened at its own path, as editors
# open it, then meets its own class here, not a copy under loopgate.… (docs/plugins.md).
from .adapter import OpenAIAdapter
from .completion import fold
from .errors import (
    INVALID_REQUEST,
    JSON,
    SERVER_ERROR,
    OpenAIError,
    error_response,
    guarded,
    invalid_body,
    refused,
)
from .models import model_names, model_table
from .projector import CREATED, INCLUDE_USAGE, MODEL
from .request import (
    ChatRequest,
    check,
    client_tools,
    include_usage,
    run_config,
    to_history,
)
from .wire import Completion, ErrorBody, Model, ModelList, WireMessage

CONSUMER = "openai"
# The run's id, where the SDKs read a response's request id (``_request_id``).
RUN_HEADER = "x-request-id"
# A failed run is not retried by the SDKs (they retry 5xx unless told): it would run again.
NO_RETRY = {"x-should-retry": "false"}
# A failed run's reason that says the request was at fault (client tools clashing with the
# loop's own, say): 400, not 500.
_CLIENT_REASONS = ("invalid_request",)


def routes(adapter: OpenAIAdapter, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    policy = stream_policy(limits)
    # When the models were made: the gateway's start (agents come and go with a reload; the
    # SDKs only show this).
    created = int(time.time())

    def model(name: str) -> Model:
        return Model(id=name, created=created, owned_by="loopgate")

    async def list_models(request: Request) -> Response:
        listed = ModelList(data=[model(name) for name in await model_names(service)])
        return Response(msgspec.json.encode(listed), media_type=JSON)

    @guarded
    async def get_model(request: Request) -> Response:
        wanted = request.path_params["model"]
        if wanted not in await model_table(service):
            raise unknown_model(wanted, "model")
        return Response(msgspec.json.encode(model(wanted)), media_type=JSON)

    @guarded
    async def chat_completions(request: Request) -> Response:
        raw = await read_body(request, limits.max_body_bytes)
        body = parse(raw, limits.max_json_depth)
        agent = (await model_table(service)).get(body.model)
        if agent is None:
            raise unknown_model(body.model, "model")
        start = start_request(body, request, agent or None)
        # The client sends the whole conversation: nothing of the thread's is added to it.
        info = await start_on_thread(service, start, limits)
        context = projector_context(info, body)
        headers = {RUN_HEADER: info.id}

        if not body.stream:
            messages = await collect(Collected(adapter, service, info, context), request)
            if messages is None:  # the client left: nobody reads an answer
                await service.cancel(info.id)
                return Response(status_code=499)
            return answer(fold(messages), headers)

        async def cancel() -> None:
            await service.cancel(info.id)

        return ChunkStream(adapter, service, info, context, policy).response(
            media_type=adapter.media_type,
            headers=headers,
            on_disconnect=cancel,
            refuse=refused,
        )

    return [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", get_model, methods=["GET"]),
    ]


def parse(raw: bytes, max_depth: int) -> ChatRequest:
    if not raw.strip():
        raise OpenAIError(400, "the request body is empty; expected a JSON object")
    try:
        body: ChatRequest = json_input.decode(raw, ChatRequest, max_depth=max_depth)
    except msgspec.DecodeError as exc:  # ValidationError and JsonTooDeep are DecodeErrors
        raise invalid_body(exc) from None
    check(body)
    return body


def unknown_model(name: str, param: str) -> OpenAIError:
    shown = name if len(name) <= 100 else name[:99] + "…"
    return OpenAIError(
        404,
        f"The model '{shown}' does not exist here; GET /v1/models lists the ones this gateway "
        "serves",
        param=param,
        code="model_not_found",
    )


def start_request(body: ChatRequest, request: Request, agent: str | None = None) -> StartRun:
    ours = body.loopgate
    metadata: dict[str, Any] = {"protocol": "openai", "model": body.model}
    return StartRun(
        input=to_history(body),
        config=run_config(body),
        thread_id=ours.thread_id if ours is not None else None,
        client_tools=client_tools(body),
        metadata=metadata,
        approval=(ours.approval if ours is not None else None) or "auto",
        traceparent=request.headers.get("traceparent"),
        tracestate=request.headers.get("tracestate"),
        agent=agent,
        multitask_strategy=ours.multitask_strategy if ours is not None else None,
        webhook=ours.webhook if ours is not None else None,
    )


def projector_context(info: RunInfo, body: ChatRequest) -> ProjectorContext:
    return ProjectorContext(
        run_id=info.id,
        thread_id=info.thread_id,
        options={
            MODEL: body.model,
            CREATED: info.created_at // 1_000_000_000,
            CLIENT_TOOLS: [spec.name for spec in client_tools(body)],
            # A whole answer always has its usage; a stream when the client asks for it.
            INCLUDE_USAGE: include_usage(body) or not body.stream,
        },
    )


class ChunkStream(ResponseStream[WireMessage, list[Envelope]]):
    """The run as ``chat.completion.chunk`` events (a streamed answer)."""

    def __init__(
        self,
        adapter: OpenAIAdapter,
        service: RunService,
        info: RunInfo,
        context: ProjectorContext,
        policy: FollowPolicy,
    ) -> None:
        super().__init__(service, info.id, adapter.projector(context), policy, consumer=CONSUMER)
        self.adapter = adapter

    def encode(self, messages: list[WireMessage]) -> bytes:
        return self.adapter.render(messages)


class Collected(EventStream[WireMessage, list[Envelope]]):
    """The run's chunks kept for one answer (a request that does not stream)."""

    def __init__(
        self, adapter: OpenAIAdapter, service: RunService, info: RunInfo, context: ProjectorContext
    ) -> None:
        projector = adapter.projector(context)
        super().__init__(service, info.id, projector, CONNECTION, consumer=CONSUMER)
        self.messages: list[WireMessage] = []

    async def send(self, messages: list[WireMessage]) -> None:
        self.messages.extend(messages)


async def collect(stream: Collected, request: Request) -> list[WireMessage] | None:
    """Every chunk of the run, or None when the client left before its end."""
    gone = False
    # Stopped by its own scope, as StreamResponse's watcher is: a task cancelled through the
    # group would keep this request alive in a reference cycle until the collector comes.
    watching = anyio.CancelScope()
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal gone
            with watching:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                gone = True
                tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await stream.run()
        watching.cancel()
    return None if gone else stream.messages


def answer(folded: Completion | ErrorBody, headers: dict[str, str]) -> Response:
    if isinstance(folded, Completion):
        return Response(msgspec.json.encode(folded), headers=headers, media_type=JSON)
    if folded.code in _CLIENT_REASONS:
        folded.type = INVALID_REQUEST
        return error_response(400, folded, headers)
    folded.type = SERVER_ERROR
    return error_response(500, folded, {**headers, **NO_RETRY})
