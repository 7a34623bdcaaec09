"""``GET /v1/runs/{id}/events``: a run's envelopes as native SSE, resumable with
``Last-Event-ID`` (or ``?after=``).

A stream ends with its run, and a browser's EventSource then reconnects with the last id it
saw, again and again: a reconnect at (or past) the end of a finished run is answered
``204 No Content``, the one answer that stops it (WHATWG HTML, server-sent events)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts.encoded import EncodedEnvelopes
from ...contracts.envelope import Envelope
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunNotFound, RunService, Subscription
from ...contracts.projector import ProjectorContext
from ..shared.follow import FollowPolicy, stream_policy
from ..shared.numbers import cursor_param
from ..shared.problem import HttpProblem, from_problem
from ..shared.stream import ResponseStream

# Relative, as is adapter.py's import of this module: a file opened at its own path, as editors
# open it, then meets its own class here, not a copy under loopgate.… (docs/plugins.md).
from .adapter import NativeAdapter
from .projector import NativeFrames, read_batch

# The hub's consumer name for these subscriptions (telemetry): the transport they read through.
CONSUMER = "sse"


def cursor_from(request: Request) -> int:
    """``Last-Event-ID`` (set by a reconnecting EventSource) wins over ``?after=``."""
    return cursor_param(request.headers.get("last-event-id") or request.query_params.get("after"))


async def nothing_after(service: RunService, run_id: str, after: int) -> bool:
    """Whether the run has finished and its last event is at or before ``after``: it will
    never have another. Finished is final, so no event can slip in after this answer."""
    try:
        info = await service.get(run_id)
    except RunNotFound:
        # The stream answers it (404, or 410 for a dropped run).
        return False
    return info.state == "finished" and after >= info.last_seq


class NativeStream(ResponseStream[bytes, list[Envelope] | EncodedEnvelopes]):
    """The run's envelopes after ``after`` as SSE frames. Frames, not envelopes: a finished
    run's are framed from the bytes the hub keeps, read undecoded."""

    def __init__(
        self,
        adapter: NativeAdapter,
        service: RunService,
        run_id: str,
        policy: FollowPolicy,
        *,
        after: int,
    ) -> None:
        context = ProjectorContext(run_id=run_id, thread_id=run_id)
        self.frames = NativeFrames(adapter.projector(context))
        super().__init__(service, run_id, self.frames, policy, consumer=CONSUMER, after=after)

    async def read(
        self, subscription: Subscription, wait: float | None
    ) -> list[Envelope] | EncodedEnvelopes:
        return await read_batch(subscription, wait)

    def project(self, batch: list[Envelope] | EncodedEnvelopes) -> list[bytes]:
        return self.frames.feed_batch(batch)

    def encode(self, messages: list[bytes]) -> bytes:
        return messages[0] if len(messages) == 1 else b"".join(messages)


def routes(adapter: NativeAdapter, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
    policy = stream_policy(limits)

    async def stream_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            after = cursor_from(request)
        except HttpProblem as exc:
            return from_problem(exc)
        # Without a cursor a finished run is sent whole, as to any first connection.
        if after > 0 and await nothing_after(service, run_id, after):
            return Response(status_code=204)
        return NativeStream(adapter, service, run_id, policy, after=after).response()

    return [Route("/v1/runs/{run_id}/events", stream_events, methods=["GET"])]
