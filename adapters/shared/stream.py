"""A streaming ASGI response that notices the client leaving, and the subscription pump.

Starlette's StreamingResponse on ASGI 2.4 servers (uvicorn) only learns of a disconnect when a
write fails, and uvicorn silently drops writes to a closed connection: an idle stream would then
live until its run ends. This response listens for ``http.disconnect`` and cancels the producer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Generic, TypeVar

import anyio
from starlette.types import Receive, Scope, Send

from adapters.shared.problem import problem_for, problem_response
from contracts.envelope import Envelope
from contracts.ports import CutOff, Subscription

T = TypeVar("T")
log = logging.getLogger("loopgate.http")
Write = Callable[[bytes], Awaitable[None]]

SSE_MEDIA_TYPE = "text/event-stream; charset=utf-8"
SSE_HEADERS = {
    "cache-control": "no-cache",
    # nginx buffers ~16 KB of a proxied response unless told not to.
    "x-accel-buffering": "no",
}
# A comment line and no blank line after it: a blank line dispatches an event in parsers that
# keep the last event id (httpx-sse hands out an empty event per keep-alive then); the WHATWG
# parser ignores the comment either way.
KEEPALIVE = b": keep-alive\n"


class StreamResponse(Generic[T]):
    """Opens ``resource`` (e.g. a subscription) *before* the status line, so a missing run or a
    full run still gets a proper problem response; then streams what ``produce`` writes."""

    def __init__(
        self,
        resource: Callable[[], AbstractAsyncContextManager[T]],
        produce: Callable[[T, Write], Awaitable[None]],
        *,
        media_type: str = SSE_MEDIA_TYPE,
        headers: Mapping[str, str] | None = None,
        on_disconnect: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.resource = resource
        self.produce = produce
        self.on_disconnect = on_disconnect
        raw = {"content-type": media_type, **SSE_HEADERS, **(headers or {})}
        self.headers = [(k.lower().encode(), v.encode()) for k, v in raw.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = started = False
        try:
            async with self.resource() as resource:
                await send({"type": "http.response.start", "status": 200, "headers": self.headers})
                started = True

                async def write(chunk: bytes) -> None:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})

                async with anyio.create_task_group() as tg:

                    async def watch() -> None:
                        nonlocal disconnected
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        disconnected = True
                        tg.cancel_scope.cancel()

                    tg.start_soon(watch)
                    # Caught inside: leaving the task group would wrap it in an ExceptionGroup.
                    with contextlib.suppress(CutOff):
                        await self.produce(resource, write)
                    tg.cancel_scope.cancel()
        except CutOff:
            pass  # the subscriber fell behind; it resumes from its cursor on reconnect
        except Exception as exc:
            problem = problem_for(exc)
            if problem is None or started:
                log.exception("event stream %s failed", scope.get("path"))
                return
            response = problem_response(problem.status, problem.detail, headers=problem.headers)
            await response(scope, receive, send)
            return
        if disconnected:
            if self.on_disconnect is not None:
                with anyio.CancelScope(shield=True):
                    await self.on_disconnect()
            return
        # A cut-off client may not be reading at all: do not wait on it forever.
        with anyio.move_on_after(1.0):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


Deliver = Callable[[list[Envelope]], Awaitable[None]]


async def pump(
    subscription: Subscription,
    deliver: Deliver,
    *,
    keepalive_s: float,
    write_timeout_s: float,
    idle: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Hand each batch of envelopes to ``deliver`` until the run's terminal event.

    A quiet stream calls ``idle`` every ``keepalive_s`` (a keep-alive comment, so idle proxies
    keep it open). Raises :class:`contracts.ports.CutOff` if the client falls too far behind,
    or takes longer than ``write_timeout_s`` to accept one delivery (lag alone cannot catch a
    client that is stuck when the run has already ended).
    """
    while not subscription.done:
        before = subscription.cursor
        batch = await subscription.next_batch(max_wait=keepalive_s)
        if not batch and (subscription.done or idle is None):
            continue
        with anyio.move_on_after(write_timeout_s) as timer:
            await (deliver(batch) if batch else idle())  # type: ignore[misc]
        if timer.cancelled_caught:
            raise CutOff(before)


def sse_writer(render: Callable[[list[Envelope]], bytes], write: Write) -> Deliver:
    """A ``deliver`` that writes the rendered bytes of each batch (skipping empty ones)."""

    async def deliver(batch: list[Envelope]) -> None:
        chunk = render(batch)
        if chunk:
            await write(chunk)

    return deliver


def keepalive_writer(write: Write, comment: bytes = KEEPALIVE) -> Callable[[], Awaitable[None]]:
    async def idle() -> None:
        await write(comment)

    return idle
