"""The native HTTP API: start, list, inspect, command and stream runs; ingest from external loops.

Every error is an RFC 9457 problem body with a ``detail`` that says what was wrong.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from adapters.shared.body import decode_json, iter_lines, read_body
from adapters.shared.endpoint import guarded
from adapters.shared.numbers import cursor_param
from adapters.shared.numbers import int_param as parse_int_param
from adapters.shared.problem import HttpProblem, from_problem, problem_for
from adapters.shared.stream import StreamResponse, keepalive_writer, pump, sse_writer
from adapters.shared.ws import (
    CLOSE_TIMEOUT_S,
    close_stopped_reader,
    origin_allowed,
    refuse,
    report_cut_off,
)
from adapters.sse.acks import CommitAcks
from adapters.sse.projector import render_events
from contracts.client_errors import client_message
from contracts.contract import contract_bytes, is_terminal_completion
from contracts.envelope import EnvelopeError, decode_event
from contracts.gateway_events import Decision
from contracts.limits import EndpointLimits
from contracts.messages import Message
from contracts.oddities import OddityLog
from contracts.ports import RunFinished, RunInfo, RunService, RunTooLarge, StartRun

log = logging.getLogger("loopgate.ingest")
JSON = "application/json"
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class StartBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    input: str | list[Message] | None = None
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    source: Literal["loop", "ingest"] | None = None
    replay: str | None = None
    pace: Literal["recorded", "fast"] = "fast"
    run_id: str | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    approval: Literal["auto", "always", "never"] = "auto"


class SteerBody(msgspec.Struct, forbid_unknown_fields=True):
    content: str


class RespondBody(msgspec.Struct, forbid_unknown_fields=True):
    request_id: str
    decision: Decision


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(msgspec.json.encode(body), status, headers=headers, media_type=JSON)


def run_json(info: RunInfo) -> dict[str, Any]:
    body = msgspec.to_builtins(info)
    body["links"] = {
        "self": f"/v1/runs/{info.id}",
        "events": f"/v1/runs/{info.id}/events",
    }
    return body


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
    )


def cursor_from(request: Request) -> int:
    """``Last-Event-ID`` (set by a reconnecting EventSource) wins over ``?after=``."""
    return cursor_param(request.headers.get("last-event-id") or request.query_params.get("after"))


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    return parse_int_param(request.query_params.get(name), name, default, low, high)


def ends_run(request: Request) -> bool:
    """``?end=1``: the body is the rest of the run (its end is synthesised if it has none)."""
    return request.query_params.get("end") in ("1", "true")


def routes(service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    # Odd payload fields of ingested events, logged once per run (not per request).
    oddity_log = OddityLog(log)

    @guarded
    async def start_run(request: Request) -> Response:
        body = decode_json(
            await read_body(request, limits.max_body_bytes),
            StartBody,
            max_depth=limits.max_json_depth,
        )
        headers = request.headers
        start = to_start_request(body, headers.get("traceparent"), headers.get("tracestate"))
        info = await service.start(start)
        location = f"/v1/runs/{info.id}"
        return json_response(run_json(info), 201, {"location": location})

    @guarded
    async def list_runs(request: Request) -> Response:
        limit = int_param(request, "limit", 100, 1, 1000)
        infos = await service.list(limit=limit, thread_id=request.query_params.get("thread_id"))
        return json_response({"runs": [run_json(i) for i in infos]})

    @guarded
    async def get_run(request: Request) -> Response:
        return json_response(run_json(await service.get(request.path_params["run_id"])))

    async def stream_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            after = cursor_from(request)
        except HttpProblem as exc:
            return from_problem(exc)

        async def produce(subscription: Any, write: Any) -> None:
            await pump(
                subscription,
                sse_writer(render_events, write),
                idle=keepalive_writer(write),
                keepalive_s=limits.keepalive_s,
                write_timeout_s=limits.write_timeout_s,
            )

        return StreamResponse(
            lambda: service.subscribe(run_id, after=after, consumer="sse"), produce
        )  # type: ignore[return-value]

    @guarded
    async def ingest_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        info = await service.get(run_id)  # 404/409 before reading a body for nothing
        if info.state == "finished":
            raise HttpProblem(409, f"run {run_id!r} has already finished ({info.status})")
        accepted = 0
        last_seq = None
        try:
            async for number, line in iter_lines(request, limits.max_line_bytes):
                try:
                    event = decode_event(line, max_depth=limits.max_json_depth)
                except EnvelopeError as exc:
                    # Only a broken envelope (not JSON, no string kind, data not an object):
                    # odd payload fields are carried through (contracts.oddities).
                    raise HttpProblem(
                        422, f"line {number}: {exc.message}", extra={"line": number}
                    ) from None
                try:
                    # Acknowledged below, once committed: the whole body shares one commit.
                    last_seq = (await service.push_nowait(run_id, event)).seq
                except RunFinished as exc:
                    # The body went on after the run's terminal event.
                    raise HttpProblem(
                        409,
                        f"line {number}: run {exc.run_id!r} has already finished ({exc.status})",
                        extra={"line": number},
                    ) from None
                except RunTooLarge as exc:
                    raise HttpProblem(
                        413, f"line {number}: {client_message(exc)}", extra={"line": number}
                    ) from None
                oddity_log.note(run_id, event.kind, event.data)
                accepted += 1
        except HttpProblem as exc:
            if last_seq is not None:
                await service.wait_committed(run_id, last_seq)
            exc.extra.update({"accepted": accepted, "last_seq": last_seq})
            exc.detail += f" ({accepted} earlier events were accepted and kept)"
            # The run stays open for a corrected retry (even with ?end=1: the body did not
            # arrive whole); if none comes, the ingest idle timeout ends it, failed.
            raise
        if last_seq is not None:
            await service.wait_committed(run_id, last_seq)
        if ends_run(request):
            await service.end_ingest(run_id)
        info = await service.get(run_id)
        return json_response({"accepted": accepted, "last_seq": last_seq, "run": run_json(info)})

    @guarded
    async def cancel_run(request: Request) -> Response:
        result = await service.cancel(request.path_params["run_id"])
        return json_response(msgspec.to_builtins(result), 202 if result.accepted else 200)

    @guarded
    async def steer_run(request: Request) -> Response:
        body = decode_json(
            await read_body(request, limits.max_body_bytes),
            SteerBody,
            max_depth=limits.max_json_depth,
        )
        result = await service.steer(request.path_params["run_id"], body.content)
        return json_response(msgspec.to_builtins(result), 202 if result.accepted else 200)

    @guarded
    async def respond(request: Request) -> Response:
        body = decode_json(
            await read_body(request, limits.max_body_bytes),
            RespondBody,
            max_depth=limits.max_json_depth,
        )
        result = await service.respond(
            request.path_params["run_id"], body.request_id, body.decision
        )
        return json_response(msgspec.to_builtins(result), 202 if result.accepted else 200)

    async def get_contract(request: Request) -> Response:
        return Response(contract_bytes(), media_type=JSON)

    async def ingest_socket(websocket: WebSocket) -> None:
        await serve_ingest_socket(websocket, service, limits, oddity_log)

    return [
        Route("/v1/runs", start_run, methods=["POST"]),
        Route("/v1/runs", list_runs, methods=["GET"]),
        Route("/v1/runs/{run_id}", get_run, methods=["GET"]),
        Route("/v1/runs/{run_id}/events", stream_events, methods=["GET"]),
        Route("/v1/runs/{run_id}/events", ingest_events, methods=["POST"]),
        Route("/v1/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
        Route("/v1/runs/{run_id}/steer", steer_run, methods=["POST"]),
        Route("/v1/runs/{run_id}/respond", respond, methods=["POST"]),
        WebSocketRoute("/v1/runs/{run_id}/ingest", ingest_socket),
        Route("/v1/contract", get_contract, methods=["GET"]),
    ]


async def serve_ingest_socket(
    websocket: WebSocket,
    service: RunService,
    limits: EndpointLimits,
    oddities: OddityLog | None = None,
) -> None:
    """One LoopEvent per text frame in; errors and commands (cancel, steer) out as JSON frames.

    The socket closing ends the producer: a run without a terminal completion is truncated.
    """
    run_id = websocket.path_params["run_id"]
    if not origin_allowed(websocket, limits):
        await refuse(websocket, "origin not allowed")
        return
    try:
        await service.get(run_id)
    except Exception as exc:
        problem = problem_for(exc)
        await refuse(websocket, problem.detail if problem else "cannot attach")
        return
    await websocket.accept()
    send_lock = anyio.Lock()
    # What a client that stops reading ends: the reader (which writes errors itself, so reads
    # no further while one cannot be written), the relay and the acks. One log line, 1008.
    cut = anyio.CancelScope()

    async def send(message: dict[str, Any]) -> None:
        async with send_lock:
            with anyio.move_on_after(limits.write_timeout_s) as timer:
                await websocket.send_text(msgspec.json.encode(message).decode())
        if timer.cancelled_caught and not cut.cancel_called:
            report_cut_off(log, "ingest", websocket, limits.write_timeout_s)
            cut.cancel()

    async def relay_commands() -> None:
        async with service.command_channel(run_id) as commands:
            async for command in commands:
                await send({"type": "command", **command})

    acks = None
    if websocket.query_params.get("ack") in ("1", "true"):
        acks = CommitAcks(service, run_id, send)
    try:
        with cut:
            async with anyio.create_task_group() as tg:
                tg.start_soon(relay_commands)
                if acks is not None:
                    tg.start_soon(acks.run)
                await receive_events(
                    websocket, service, run_id, limits, send, oddities or OddityLog(log), acks
                )
                tg.cancel_scope.cancel()
    except* (WebSocketDisconnect, RunFinished):
        pass
    finally:
        with anyio.CancelScope(shield=True):
            await service.end_ingest(run_id)
    if cut.cancel_called:
        await close_stopped_reader(websocket)
    elif websocket.client_state.name == "CONNECTED":
        with anyio.move_on_after(CLOSE_TIMEOUT_S):
            await websocket.close()


async def receive_events(
    websocket: WebSocket,
    service: RunService,
    run_id: str,
    limits: EndpointLimits,
    send: Callable[[dict[str, Any]], Awaitable[None]],
    oddities: OddityLog,
    acks: CommitAcks | None = None,
) -> None:
    frame = 0
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        frame += 1
        raw = message.get("text") or message.get("bytes") or b""
        if len(raw) > limits.max_frame_bytes:
            detail = f"frame is larger than the limit of {limits.max_frame_bytes} bytes"
            await send({"type": "error", "frame": frame, "detail": detail})
            continue
        try:
            event = decode_event(raw, max_depth=limits.max_json_depth)
            env = await service.push_nowait(run_id, event)
        except EnvelopeError as exc:
            await send({"type": "error", "frame": frame, "detail": exc.message})
            continue
        except RunFinished as exc:
            detail = f"run {exc.run_id!r} has already finished ({exc.status})"
            await send({"type": "error", "frame": frame, "detail": detail})
            return
        except RunTooLarge as exc:
            await send({"type": "error", "frame": frame, "detail": client_message(exc)})
            return
        oddities.note(run_id, event.kind, event.data)
        if is_terminal_completion(env.kind, env.data):
            # `end` acknowledges every frame before it: only once they are committed.
            await service.wait_committed(run_id, env.seq)
            await send({"type": "end", "frame": frame, "seq": env.seq})
            return
        if acks is not None:
            acks.pushed(frame, env.seq)
