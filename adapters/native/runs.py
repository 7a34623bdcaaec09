"""The REST API of runs: start, list, inspect, cancel, steer, answer permission requests.

A prompt string on a ``thread_id`` that has runs continues that thread (adapters/shared/threads.py).

Every error is an RFC 9457 problem body with a ``detail`` that says what was wrong.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts.contract import contract_bytes
from ...contracts.gateway_events import Decision
from ...contracts.limits import EndpointLimits
from ...contracts.messages import Message
from ...contracts.ports import CommandResult, MultitaskStrategy, RunInfo, RunService, StartRun
from ..shared.body import decode_json, read_body
from ..shared.endpoint import guarded
from ..shared.multitask import start_on_thread
from ..shared.numbers import int_param
from ..shared.problem import HttpProblem
from ..shared.threads import ThreadBusy

JSON = "application/json"
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# ``?limit=`` of the list endpoints (runs, threads): its default and its largest value.
LIMIT_DEFAULT, LIMIT_MAX = 100, 1000


def about(description: str) -> msgspec.Meta:
    """A field's description in the API's schema (/openapi.json); it checks nothing."""
    return msgspec.Meta(description=description)


class StartBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A run to start: a prompt or a message list for the loop, or ``source: ingest`` for your
    own loop to push events into, or ``replay``: a recorded stream served as a live run."""

    input: Annotated[
        str | list[Message] | None,
        about(
            "a prompt, or the whole conversation as messages; a prompt on a `thread_id` "
            "that has runs continues that thread"
        ),
    ] = None
    config: Annotated[
        dict[str, Any],
        about("the loop's settings: for the reference loop its limits (`GET /v1/contract`)"),
    ] = msgspec.field(default_factory=dict[str, Any])
    source: Annotated[
        Literal["loop", "ingest"] | None,
        about("`loop` (the default), or `ingest`: your own loop pushes the events"),
    ] = None
    replay: Annotated[str | None, about("the name of a recorded stream to serve as a live run")] = (
        None
    )
    pace: Annotated[
        Literal["recorded", "fast"], about("a replay's pace: as recorded, or at once")
    ] = "fast"
    run_id: Annotated[
        str | None, about("your own id: 1-128 letters, digits, `_`, `.`, `:` or `-`; 409 if taken")
    ] = None
    thread_id: Annotated[str | None, about("the thread the run belongs to")] = None
    metadata: Annotated[dict[str, Any], about("free-form, kept with the run")] = msgspec.field(
        default_factory=dict[str, Any]
    )
    approval: Annotated[
        Literal["auto", "always", "never"],
        about("which tool calls wait for a client's answer: those that ask, all, or none"),
    ] = "auto"
    agent: Annotated[
        str | None,
        about(
            "the agent to run (`GET /v1/agents`); none: the thread's agent when it has runs, "
            "else the default one"
        ),
    ] = None
    multitask_strategy: Annotated[
        MultitaskStrategy | None,
        about(
            "one run per `thread_id` at a time; when it has one going: `reject` (409), "
            "`enqueue` (wait for its end), `interrupt` (cancel it, keep its output) or "
            "`rollback` (cancel it, leave it out of the thread)"
        ),
    ] = None
    webhook: Annotated[
        str | None,
        about(
            "a URL the gateway POSTs the run's final state to once it has ended (retried on "
            "failure); only hosts the operator allows (`allowed_outbound`)"
        ),
    ] = None


class SteerBody(msgspec.Struct, forbid_unknown_fields=True):
    content: Annotated[str, about("what to tell the loop at its next round boundary")]


class RespondBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``requestId`` as the ``permission_request`` event (and JSON-RPC's ``run.respond``)
    spell it; ``request_id``, this endpoint's first spelling, is still accepted."""

    request_id: Annotated[
        str | None, about("the `requestId` of the run's `permission_request`")
    ] = msgspec.field(default=None, name="requestId")
    snake_request_id: Annotated[
        str | None, about("the same id under this endpoint's first spelling (either will do)")
    ] = msgspec.field(default=None, name="request_id")
    decision: Decision

    def answered(self) -> str:
        """The request's id under either spelling (one of them, or both alike)."""
        camel, snake = self.request_id, self.snake_request_id
        if camel is None:
            if snake is None:
                raise HttpProblem(
                    422, "invalid request body: `requestId` is required (the permission_request's)"
                )
            return snake
        if snake is not None and snake != camel:
            raise HttpProblem(
                422, "invalid request body: `requestId` and `request_id` name different requests"
            )
        return camel


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(body), status, headers=headers, media_type=JSON)


class RunLinks(msgspec.Struct):
    self: str
    events: str


class RunView(RunInfo, kw_only=True):
    """A run: ``state`` is running or finished, ``status`` its terminal completion's status once
    finished, ``last_seq`` the seq of its latest event, ``input`` the messages it started with."""

    links: RunLinks


class RunList(msgspec.Struct):
    """Runs, newest first."""

    runs: list[RunView]


def run_json(info: RunInfo) -> RunView:
    links = RunLinks(self=f"/v1/runs/{info.id}", events=f"/v1/runs/{info.id}/events")
    return RunView(**msgspec.structs.asdict(info), links=links)


def command_response(result: CommandResult) -> Response:
    """202 for an accepted command; 200 with ``accepted: false`` for one with nothing to act on."""
    return json_response(result, 202 if result.accepted else 200)


def limit_param(request: Request) -> int:
    return int_param(request.query_params.get("limit"), "limit", LIMIT_DEFAULT, 1, LIMIT_MAX)


def to_start_request(
    body: StartBody, traceparent: str | None, tracestate: str | None = None
) -> StartRun:
    if body.replay is not None and body.source is not None:
        raise HttpProblem(422, "give either `replay` or `source`, not both")
    if body.run_id is not None and not _RUN_ID.fullmatch(body.run_id):
        raise HttpProblem(422, "run_id must be 1-128 letters, digits, '_', '.', ':' or '-'")
    source = "replay" if body.replay is not None else (body.source or "loop")
    return StartRun(
        input=body.input,
        config=body.config,
        source=source,
        replay=body.replay,
        replay_pace=body.pace,
        run_id=body.run_id,
        thread_id=body.thread_id,
        metadata=body.metadata,
        approval=body.approval,
        traceparent=traceparent,
        tracestate=tracestate,
        agent=body.agent,
        multitask_strategy=body.multitask_strategy,
        webhook=body.webhook,
    )


def routes(service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    async def body_of(request: Request, typ: type[Any]) -> Any:
        raw = await read_body(request, limits.max_body_bytes)
        return decode_json(raw, typ, max_depth=limits.max_json_depth)

    @guarded
    async def start_run(request: Request) -> Response:
        body = await body_of(request, StartBody)
        headers = request.headers
        start = to_start_request(body, headers.get("traceparent"), headers.get("tracestate"))
        try:
            # Which claims the thread: ThreadBusy from the claim too.
            info = await start_on_thread(service, start, limits)
        except ThreadBusy as exc:
            raise HttpProblem(409, exc.detail) from None
        return json_response(run_json(info), 201, {"location": f"/v1/runs/{info.id}"})

    @guarded
    async def list_runs(request: Request) -> Response:
        limit = limit_param(request)
        thread_id = request.query_params.get("thread_id")
        infos = await service.list_runs(limit=limit, thread_id=thread_id)
        return json_response(RunList([run_json(i) for i in infos]))

    @guarded
    async def get_run(request: Request) -> Response:
        info = await service.get(request.path_params["run_id"], attachments=True)
        return json_response(run_json(info))

    @guarded
    async def cancel_run(request: Request) -> Response:
        return command_response(await service.cancel(request.path_params["run_id"]))

    @guarded
    async def steer_run(request: Request) -> Response:
        body: SteerBody = await body_of(request, SteerBody)
        return command_response(await service.steer(request.path_params["run_id"], body.content))

    @guarded
    async def respond(request: Request) -> Response:
        body: RespondBody = await body_of(request, RespondBody)
        run_id = request.path_params["run_id"]
        return command_response(await service.respond(run_id, body.answered(), body.decision))

    async def get_contract(request: Request) -> Response:
        return Response(contract_bytes(), media_type=JSON)

    return [
        Route("/v1/runs", start_run, methods=["POST"]),
        Route("/v1/runs", list_runs, methods=["GET"]),
        Route("/v1/runs/{run_id}", get_run, methods=["GET"]),
        Route("/v1/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
        Route("/v1/runs/{run_id}/steer", steer_run, methods=["POST"]),
        Route("/v1/runs/{run_id}/respond", respond, methods=["POST"]),
        Route("/v1/contract", get_contract, methods=["GET"]),
    ]
