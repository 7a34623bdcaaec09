"""Ingest: events from a loop that runs on its own, pushed over HTTP (NDJSON) or a WebSocket.

Payloads are taken as the loop sends them; only the envelope is checked (contracts.envelope),
and odd payload fields are logged once per run (contracts.oddities).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...contracts.client_errors import client_message
from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import EnvelopeError, decode_event
from ...contracts.limits import EndpointLimits
from ...contracts.oddities import OddityLog
from ...contracts.ports import RunFinished, RunService, RunTooLarge
from ..shared.body import iter_lines
from ..shared.connection import stream_body
from ..shared.endpoint import guarded
from ..shared.problem import HttpProblem, problem_for
from ..shared.ws import (
    CLOSE_TIMEOUT_S,
    close_stopped_reader,
    open_both_ways,
    origin_allowed,
    refuse,
    report_cut_off,
)
from .acks import CommitAcks
from .runs import RunView, json_response, run_json

log = logging.getLogger("loopgate.ingest")


class IngestResult(msgspec.Struct):
    """The events of the body are committed: how many, up to which seq, and the run after them."""

    accepted: int
    last_seq: int | None
    run: RunView


def ends_run(request: Request) -> bool:
    """``?end=1``: the body is the rest of the run (its end is synthesised if it has none)."""
    return request.query_params.get("end") in ("1", "true")


def routes(service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    # Odd payload fields of ingested events, logged once per run (not per request).
    oddity_log = OddityLog(log)

    @guarded
    async def ingest_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        # A loop may push a whole run through one streamed body: no total deadline, and the
        # gap between lines may be as long as the run's own idle bound.
        stream_body(request.scope, limits.ingest_idle_timeout_s)
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
        return json_response(IngestResult(accepted, last_seq, run_json(info)))

    async def ingest_socket(websocket: WebSocket) -> None:
        await serve_ingest_socket(websocket, service, limits, oddity_log)

    return [
        Route("/v1/runs/{run_id}/events", ingest_events, methods=["POST"]),
        WebSocketRoute("/v1/runs/{run_id}/ingest", ingest_socket),
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
    # The relay and the acks end by scopes of their own, not the group's: a child task that
    # ends cancelled leaves a reference cycle in anyio (its CancelledError's traceback holds
    # the frame that holds it), and with it the connection, for the cyclic collector.
    helpers = anyio.CancelScope(), anyio.CancelScope()
    try:
        with cut:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_within, helpers[0], relay_commands)
                if acks is not None:
                    tg.start_soon(_within, helpers[1], acks.run)
                await receive_events(
                    websocket, service, run_id, limits, send, oddities or OddityLog(log), acks
                )
                for helper in helpers:
                    helper.cancel()
    except* (WebSocketDisconnect, RunFinished):
        pass
    finally:
        with anyio.CancelScope(shield=True):
            await service.end_ingest(run_id)
    if cut.cancel_called:
        await close_stopped_reader(websocket)
    elif open_both_ways(websocket):
        with anyio.move_on_after(CLOSE_TIMEOUT_S):
            await websocket.close()


async def _within(scope: anyio.CancelScope, run: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await run()


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
