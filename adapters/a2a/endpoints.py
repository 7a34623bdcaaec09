"""A2A's routes: the Agent Card, the JSON-RPC binding (``POST /a2a``) and the HTTP+JSON
binding (``/a2a/rest/…``); the same under ``/agents/{name}`` for the agent of that name.

Both bindings call the same operations (adapters.a2a.calls) and differ only in framing: a
JSON-RPC response (or SSE of JSON-RPC responses) of the request's id, or the bare object (or
SSE of bare ``StreamResponse``s) with HTTP statuses and ``google.rpc.Status`` errors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ...contracts.client_errors import describe_input_error
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ..shared import jsonrpc
from ..shared.agents import AGENT_PREFIX, served_agent
from ..shared.body import read_body
from ..shared.follow import stream_policy
from ..shared.problem import HttpProblem
from .adapter import A2AAdapter
from .calls import (
    builtins,
    cancel_task,
    get_task,
    list_tasks,
    problem_error,
    send_message,
    stream_turn,
    subscribe_turn,
)
from .card import CARD_PATH, REST_PATH, RPC_PATH, agent_card
from .errors import A2AError, translate
from .push import PushConfigs
from .tasks import Turn, send
from .wire import (
    Item,
    ListParams,
    PushConfig,
    PushConfigParams,
    SendParams,
    TaskParams,
    stream_item,
)

log = logging.getLogger("loopgate.a2a")
T = TypeVar("T")
_encode = msgspec.json.Encoder().encode


def _params(value: Any, typ: type[T]) -> T:
    try:
        return msgspec.convert(value, typ)
    except msgspec.ValidationError as exc:
        raise A2AError.invalid_params(describe_input_error(exc, root="params")) from None


def _json(raw: bytes, max_depth: int) -> Any:
    try:
        return jsonrpc.parse(raw, max_depth)
    except jsonrpc.ParseFailure as exc:
        raise A2AError.parse_error(exc.detail) from None


def routes(adapter: A2AAdapter, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    policy = stream_policy(limits)
    push = PushConfigs(service, limits.client_outbound, limits.outbox)

    async def start(params: SendParams, agent: str | None) -> Turn:
        """The message's turn, followed for the task's webhooks (a config sent with it
        first)."""
        turn = await send(service, params.message, agent)
        wanted = (
            params.configuration.task_push_notification_config if params.configuration else None
        )
        if wanted is not None:
            await push.create(turn.task_id, _params(wanted, PushConfig))
        push.follow(turn)
        return turn

    async def agent_of(request: Request) -> str | None:
        return await served_agent(service, request.path_params.get("name"))

    # --- the card ------------------------------------------------------------------------------

    async def card(request: Request) -> Response:
        name = request.path_params.get("name")
        try:
            agents = await service.agents()
        except Exception as exc:
            return _rest_error(exc, request)
        chosen = next(
            (a for a in agents if (a.name == name if name else a.default)),
            agents[0] if agents and not name else None,
        )
        if chosen is None:
            known = ", ".join(a.name for a in agents)
            message = f"no agent named {str(name)[:100]!r}; this gateway serves: {known}"
            return A2AError(-32001, "NOT_FOUND", 404, message).response()
        base = str(request.base_url).rstrip("/")
        prefix = f"/agents/{chosen.name}" if name else ""
        return JSONResponse(agent_card(base, chosen, prefix, push=push.supported()))

    # --- JSON-RPC ------------------------------------------------------------------------------

    async def rpc(request: Request) -> Response:
        rid: jsonrpc.Id = None
        try:
            agent = await agent_of(request)
            raw = await read_body(request, limits.max_body_bytes)
            doc = _json(raw, limits.max_json_depth)
            if isinstance(doc, list):
                raise A2AError.invalid_request("batches are not supported by A2A")
            call = jsonrpc.classify(doc)
            if isinstance(call, jsonrpc.Invalid):
                rid = call.id
                raise A2AError(call.code, "INVALID_REQUEST", 400, call.detail)
            if isinstance(call, jsonrpc.Reply):
                raise A2AError.invalid_request("a response is not a request")
            rid = call.id
            return await rpc_call(call.method, call.params or {}, rid, agent)
        except Exception as exc:
            return _rpc_error(exc, rid, request)

    async def rpc_call(method: str, params: Any, rid: jsonrpc.Id, agent: str | None) -> Response:
        if method == "SendStreamingMessage":
            return await rpc_stream(await start(_params(params, SendParams), agent), rid)
        if method == "SubscribeToTask":
            turn = await subscribe_turn(service, _params(params, TaskParams).id)
            return await rpc_stream(turn, rid)
        result: Any
        if method == "SendMessage":
            result = {
                "task": await send_message(start, service, _params(params, SendParams), agent)
            }
        elif method == "GetTask":
            p = _params(params, TaskParams)
            result = await get_task(service, p.id, p.history_length)
        elif method == "CancelTask":
            result = await cancel_task(service, _params(params, TaskParams).id)
        elif method == "ListTasks":
            result = await list_tasks(service, _params(params, ListParams))
        elif method == "CreateTaskPushNotificationConfig":
            config = _params(params, PushConfig)
            result = await push.create(config.task_id, config)
        elif method == "GetTaskPushNotificationConfig":
            which = _params(params, PushConfigParams)
            result = await push.get(which.task_id, which.id)
        elif method == "ListTaskPushNotificationConfigs":
            which = _params(params, PushConfigParams)
            result = {"configs": await push.list(which.task_id), "nextPageToken": ""}
        elif method == "DeleteTaskPushNotificationConfig":
            which = _params(params, PushConfigParams)
            await push.delete(which.task_id, which.id)
            result = {}
        elif method == "GetExtendedAgentCard":
            raise A2AError(-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400, "no extended card")
        else:
            raise A2AError.method_not_found(method)
        return _rpc_result(rid, result)

    async def rpc_stream(turn: Turn, rid: jsonrpc.Id) -> Response:
        """Each item as the JSON-RPC response of the request's id, one per SSE event."""

        def encode(items: list[Item]) -> bytes:
            return b"".join(
                b"data: %b\n\n"
                % _encode({"jsonrpc": "2.0", "id": rid, "result": stream_item(item)})
                for item in items
            )

        return await stream_turn(service, turn, policy, encode, _rpc_refusal(rid))

    # --- HTTP+JSON -----------------------------------------------------------------------------

    def rest(
        handler: Callable[[Request, str | None], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                agent = await agent_of(request)
                return await handler(request, agent)
            except Exception as exc:
                return _rest_error(exc, request)

        return endpoint

    async def body(request: Request, typ: type[T]) -> T:
        raw = await read_body(request, limits.max_body_bytes)
        if not raw.strip():
            raise A2AError.invalid_request("request body is empty; expected a JSON object")
        return _params(_json(raw, limits.max_json_depth), typ)

    async def rest_send(request: Request, agent: str | None) -> Response:
        task = await send_message(start, service, await body(request, SendParams), agent)
        return JSONResponse(builtins({"task": task}))

    async def rest_stream(request: Request, agent: str | None) -> Response:
        turn = await start(await body(request, SendParams), agent)
        return await stream_turn(service, turn, policy, adapter.render, _rest_refusal)

    async def rest_get(request: Request, agent: str | None) -> Response:
        length = request.query_params.get("historyLength")
        if length is not None and not length.isdigit():
            raise A2AError.invalid_params("historyLength must be a whole number")
        task = await get_task(service, request.path_params["task_id"], _int(length))
        return JSONResponse(builtins(task))

    async def rest_cancel(request: Request, agent: str | None) -> Response:
        return JSONResponse(builtins(await cancel_task(service, request.path_params["task_id"])))

    async def rest_subscribe(request: Request, agent: str | None) -> Response:
        turn = await subscribe_turn(service, request.path_params["task_id"])
        return await stream_turn(service, turn, policy, adapter.render, _rest_refusal)

    async def rest_list(request: Request, agent: str | None) -> Response:
        query = request.query_params
        size = query.get("pageSize")
        if size is not None and not size.isdigit():
            raise A2AError.invalid_params("pageSize must be a whole number")
        params = ListParams(
            context_id=query.get("contextId", ""),
            status=query.get("status", ""),
            page_size=_int(size),
            page_token=query.get("pageToken", ""),
        )
        return JSONResponse(builtins(await list_tasks(service, params)))

    async def rest_push_create(request: Request, agent: str | None) -> Response:
        config = await body(request, PushConfig)
        stored = await push.create(request.path_params["task_id"], config)
        return JSONResponse(builtins(stored))

    async def rest_push_list(request: Request, agent: str | None) -> Response:
        configs = await push.list(request.path_params["task_id"])
        return JSONResponse(builtins({"configs": configs, "nextPageToken": ""}))

    async def rest_push_get(request: Request, agent: str | None) -> Response:
        found = await push.get(request.path_params["task_id"], request.path_params["config"])
        return JSONResponse(builtins(found))

    async def rest_push_delete(request: Request, agent: str | None) -> Response:
        await push.delete(request.path_params["task_id"], request.path_params["config"])
        return JSONResponse({})

    out: list[BaseRoute] = []
    for prefix in ("", AGENT_PREFIX):
        base = prefix + REST_PATH
        configs = base + "/tasks/{task_id}/pushNotificationConfigs"
        out += [
            Route(prefix + CARD_PATH, card, methods=["GET"]),
            Route(prefix + RPC_PATH, rpc, methods=["POST"]),
            Route(base + "/message:send", rest(rest_send), methods=["POST"]),
            Route(base + "/message:stream", rest(rest_stream), methods=["POST"]),
            Route(base + "/tasks", rest(rest_list), methods=["GET"]),
            Route(base + "/tasks/{task_id}:cancel", rest(rest_cancel), methods=["POST"]),
            Route(
                base + "/tasks/{task_id}:subscribe", rest(rest_subscribe), methods=["GET", "POST"]
            ),
            Route(configs, rest(rest_push_create), methods=["POST"]),
            Route(configs, rest(rest_push_list), methods=["GET"]),
            Route(configs + "/{config}", rest(rest_push_get), methods=["GET"]),
            Route(configs + "/{config}", rest(rest_push_delete), methods=["DELETE"]),
            Route(base + "/tasks/{task_id}", rest(rest_get), methods=["GET"]),
        ]
    return out


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None


def _error_of(exc: Exception, request: Request) -> A2AError:
    error = translate(exc)
    if error is None:
        log.error("A2A call %s failed", request.url.path, exc_info=exc)
        return A2AError.internal()
    return error


def _rpc_result(rid: jsonrpc.Id, result: Any) -> Response:
    body = _encode({"jsonrpc": "2.0", "id": rid, "result": result})
    return Response(body, media_type="application/json")


def _rpc_error(exc: Exception, rid: jsonrpc.Id, request: Request) -> Response:
    error = _error_of(exc, request)
    body = _encode({"jsonrpc": "2.0", "id": rid, "error": error.rpc_error()})
    return Response(body, media_type="application/json", headers=error.headers)


def _rpc_refusal(rid: jsonrpc.Id) -> Callable[[HttpProblem], Response]:
    def refuse(problem: HttpProblem) -> Response:
        error = problem_error(problem)
        body = _encode({"jsonrpc": "2.0", "id": rid, "error": error.rpc_error()})
        return Response(body, media_type="application/json")

    return refuse


def _rest_refusal(problem: HttpProblem) -> Response:
    return problem_error(problem).response()


def _rest_error(exc: Exception, request: Request) -> Response:
    return _error_of(exc, request).response()
