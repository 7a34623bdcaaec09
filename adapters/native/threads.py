"""The REST API of thread records: a thread known before its first run (an ACP session that
has had no prompt yet), so that every process sharing the gateway finds it.

A thread also exists without a record as soon as a run names it; its runs are listed with
``GET /v1/runs?thread_id=…``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService, ThreadExists, ThreadInfo
from ..shared.body import decode_json, read_body
from ..shared.endpoint import guarded
from ..shared.numbers import shown
from ..shared.problem import HttpProblem
from .runs import about, json_response, limit_param

# Ids go in URL paths: the characters a run id may have, and no others.
_THREAD_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class ThreadBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: Annotated[
        str | None,
        about("1-128 letters, digits, `_`, `.`, `:` or `-`; made up as `thread_…` when absent"),
    ] = None
    metadata: Annotated[dict[str, Any], about("free-form, kept with the record")] = msgspec.field(
        default_factory=dict[str, Any]
    )


class ThreadLinks(msgspec.Struct):
    self: str
    runs: str


class ThreadView(ThreadInfo, kw_only=True):
    """A recorded thread: its id, when it was recorded (unix ns) and its metadata; its runs are
    listed at ``links.runs``."""

    links: ThreadLinks


class ThreadList(msgspec.Struct):
    """Recorded threads, newest first."""

    threads: list[ThreadView]


def thread_json(thread: ThreadInfo) -> ThreadView:
    links = ThreadLinks(self=f"/v1/threads/{thread.id}", runs=f"/v1/runs?thread_id={thread.id}")
    return ThreadView(**msgspec.structs.asdict(thread), links=links)


def not_recorded(thread_id: str) -> HttpProblem:
    return HttpProblem(404, f"no thread {shown(thread_id)} is recorded")


def routes(service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    @guarded
    async def create_thread(request: Request) -> Response:
        raw = await read_body(request, limits.max_body_bytes)
        # No body at all: an id is made up, and the thread has no metadata.
        body: ThreadBody = (
            decode_json(raw, ThreadBody, max_depth=limits.max_json_depth)
            if raw.strip()
            else ThreadBody()
        )
        if body.id is not None and not _THREAD_ID.fullmatch(body.id):
            raise HttpProblem(422, "id must be 1-128 letters, digits, '_', '.', ':' or '-'")
        try:
            thread = await service.create_thread(body.id, metadata=body.metadata)
        except ThreadExists:
            raise HttpProblem(409, f"a thread {shown(body.id or '')} is already recorded") from None
        return json_response(thread_json(thread), 201, {"location": f"/v1/threads/{thread.id}"})

    @guarded
    async def list_threads(request: Request) -> Response:
        limit = limit_param(request)
        threads = await service.list_threads(limit=limit)
        return json_response(ThreadList([thread_json(t) for t in threads]))

    @guarded
    async def get_thread(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        thread = await service.get_thread(thread_id)
        if thread is None:
            raise not_recorded(thread_id)
        return json_response(thread_json(thread))

    @guarded
    async def forget_thread(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not await service.forget_thread(thread_id):
            raise not_recorded(thread_id)
        return Response(status_code=204)

    return [
        Route("/v1/threads", create_thread, methods=["POST"]),
        Route("/v1/threads", list_threads, methods=["GET"]),
        Route("/v1/threads/{thread_id}", get_thread, methods=["GET"]),
        Route("/v1/threads/{thread_id}", forget_thread, methods=["DELETE"]),
    ]
