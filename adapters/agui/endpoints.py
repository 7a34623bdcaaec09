"""AG-UI over HTTP (POST → SSE) and over WebSocket (one JSON event per text frame), for the
default agent (``/agui``) and for each agent by name (``/agents/{name}/agui``)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskGroup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...contracts import json_input
from ...contracts.agents import UnknownAgent
from ...contracts.client_errors import describe_input_error
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ..shared.agents import AGENT_PREFIX, served_agent
from ..shared.body import decode_json, read_body
from ..shared.endpoint import guarded
from ..shared.follow import CONNECTION, stream_policy
from ..shared.problem import HttpProblem, problem_for
from ..shared.ws import (
    close_stopped_reader,
    deny,
    origin_allowed,
    refuse,
    report_cut_off,
)

# Relative, as is adapter.py's import of this module: a file opened at its own path, as editors
# open it, then meets its own class here, not a copy under loopgate.… (docs/plugins.md).
from .adapter import AguiAdapter
from .events import Custom, RunError
from .input import ResumeFrame, RunAgentInput, detached
from .runs import RunPlan, plan_run
from .stream import AguiResponse, AguiStream

log = logging.getLogger("loopgate.agui")
# RUN_ERROR codes of refused starts on the socket (a POST answers the HTTP status instead).
_CODES = {403: "forbidden", 429: "rate_limited", 503: "unavailable"}


def routes(adapter: AguiAdapter, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    policy = stream_policy(limits)

    @guarded
    async def run_agent(request: Request) -> Response:
        # /agui names no agent: the thread's, else the default (StartRun.agent None).
        agent = await served_agent(service, request.path_params.get("name"))
        body = decode_json(
            await read_body(request, limits.max_body_bytes),
            RunAgentInput,
            max_depth=limits.max_json_depth,
        )
        headers = request.headers
        plan = await plan_run(
            service,
            body,
            headers.get("traceparent"),
            headers.get("tracestate"),
            agent=agent,
            limits=limits,
        )

        async def cancel() -> None:
            await service.cancel(plan.info.id)

        return AguiResponse(adapter, service, plan, policy).response(
            media_type=adapter.media_type,
            on_disconnect=cancel if plan.drives and not detached(body) else None,
        )

    async def socket(websocket: WebSocket) -> None:
        await serve_socket(adapter, websocket, service, limits)

    return [
        Route("/agui", run_agent, methods=["POST"]),
        WebSocketRoute("/agui/ws", socket),
        Route(f"{AGENT_PREFIX}/agui", run_agent, methods=["POST"]),
        WebSocketRoute(f"{AGENT_PREFIX}/agui/ws", socket),
    ]


# --- WebSocket -------------------------------------------------------------------------------


def parse_frame(
    raw: str | bytes, max_depth: int = json_input.DEFAULT_MAX_DEPTH
) -> RunAgentInput | None:
    """A RunAgentInput to start a run (or attach, or answer approvals), None for
    ``{"type": "cancel"}``; ``{"type": "resume", …}`` is the attaching RunAgentInput it stands
    for. A msgspec error (``JsonTooDeep`` among them) for anything else."""
    value = json_input.decode(raw, max_depth=max_depth)
    if not isinstance(value, dict):
        raise msgspec.ValidationError("a frame must be a JSON object")
    kind = value.get("type")
    if kind == "cancel":
        return None
    if kind == "resume":
        return msgspec.convert(value, ResumeFrame).as_input()
    return msgspec.convert(value, RunAgentInput)


class _Socket:
    """One AG-UI WebSocket: runs one at a time; bad frames get an error frame, never a close.

    Error frames are AG-UI events: RUN_ERROR (code ``invalid_input`` …) when no run is active —
    a stream may begin with RUN_ERROR — and CUSTOM ``loopgate.error`` while one is, so the
    active run is not ended by a stray frame.

    The reader writes those error frames itself: while one cannot be written it reads no
    further. A client that accepts nothing for ``write_timeout_s`` (error frames or its run's
    events) is cut off: one log line, the socket closed with 1008.
    """

    def __init__(
        self,
        adapter: AguiAdapter,
        websocket: WebSocket,
        service: RunService,
        limits: EndpointLimits,
        agent: str | None = None,
    ) -> None:
        self.adapter = adapter
        self.agent = agent  # the agent of the socket's path, for every run started on it
        self.websocket = websocket
        self.service = service
        self.limits = limits
        self.lock = anyio.Lock()
        self.run_id: str | None = None
        self.detached = False
        self.busy = False
        self.scope = anyio.CancelScope()  # the reader's and the run's: what a cut-off ends
        self.cut = False

    async def emit(self, events: list[Any]) -> None:
        encode = self.adapter.render_json
        async with self.lock:
            with anyio.move_on_after(self.limits.write_timeout_s) as timer:
                for event in events:
                    await self.websocket.send_text(encode(event).decode())
        if timer.cancelled_caught:
            self.cut_off()

    def cut_off(self) -> None:
        if not self.cut:
            self.cut = True
            report_cut_off(log, "AG-UI", self.websocket, self.limits.write_timeout_s)
            self.scope.cancel()

    async def error(self, message: str, code: str) -> None:
        event: Any = (
            Custom(name="loopgate.error", value={"code": code, "message": message})
            if self.busy
            else RunError(message=message, code=code)
        )
        await self.emit([event])

    async def run(self, body: RunAgentInput) -> None:
        try:
            try:
                plan = await plan_run(
                    self.service,
                    body,
                    None,
                    agent=self.agent,
                    limits=self.limits,
                )
            except Exception as exc:
                problem = problem_for(exc)
                self.busy = False
                if problem is None:
                    # Not one of ours: its text stays in the log, the socket goes on.
                    log.exception("starting an AG-UI run failed")
                    await self.error("internal error; the server log has the details", "internal")
                    return
                # Refusals the client can tell apart (a read-only key, a quota), not bad input.
                await self.error(problem.detail, _CODES.get(problem.status, "invalid_input"))
                return
            self.run_id = plan.info.id
            self.detached = detached(body) or not plan.drives
            ending = await _SocketStream(self, plan).run()
            if ending == "cut_off":
                # A client too slow for its run has stopped reading: the socket goes (the
                # client may resume on another one).
                self.cut_off()
        finally:
            self.busy, self.run_id = False, None

    async def handle(self, raw: str | bytes, tg: TaskGroup) -> None:
        if len(raw) > self.limits.max_frame_bytes:
            limit = self.limits.max_frame_bytes
            await self.error(f"frame is larger than the limit of {limit} bytes", "frame_too_large")
            return
        try:
            frame = parse_frame(raw, self.limits.max_json_depth)
        except msgspec.DecodeError as exc:  # ValidationError and JsonTooDeep are DecodeErrors
            detail = describe_input_error(exc, root="frame")
            await self.error(f"invalid frame: {detail}", "invalid_input")
            return
        if frame is None:
            if self.run_id is not None:
                await self.service.cancel(self.run_id)
            else:
                await self.error("no run is active on this socket", "no_active_run")
            return
        if self.busy:
            await self.error(
                'a run is already active on this socket; send {"type": "cancel"} or wait for '
                "it to finish",
                "busy",
            )
            return
        self.busy = True
        tg.start_soon(self.run, frame)


class _SocketStream(AguiStream):
    """A run on an AG-UI WebSocket: its events go out through the socket's own bounded writes."""

    def __init__(self, socket: _Socket, plan: RunPlan) -> None:
        super().__init__(socket.adapter, socket.service, plan, CONNECTION)
        self.socket = socket

    async def send(self, messages: list[Any]) -> None:
        await self.socket.emit(messages)


async def serve_socket(
    adapter: AguiAdapter, websocket: WebSocket, service: RunService, limits: EndpointLimits
) -> None:
    if not origin_allowed(websocket, limits):
        await refuse(websocket, "origin not allowed")
        return
    try:
        agent = await served_agent(service, websocket.path_params.get("name"))
    except UnknownAgent as exc:
        # Before the upgrade: the client learns it as a POST would, a 404 naming the agents.
        await deny(websocket, HttpProblem(404, exc.message))
        return
    await websocket.accept()
    socket = _Socket(adapter, websocket, service, limits, agent)
    try:
        with socket.scope:
            async with anyio.create_task_group() as tg:
                try:
                    while True:
                        message = await websocket.receive()
                        if message["type"] == "websocket.disconnect":
                            break
                        raw = message.get("text") or message.get("bytes") or b""
                        await socket.handle(raw, tg)
                finally:
                    # Before the run's task is cancelled (which forgets its id): the client left.
                    if socket.run_id is not None and not socket.detached:
                        with anyio.CancelScope(shield=True):
                            await service.cancel(socket.run_id)
                    tg.cancel_scope.cancel()
    except* WebSocketDisconnect:
        pass
    if socket.cut:
        await close_stopped_reader(websocket)
