"""A streaming response that opens its resource before the status line and notices the client
leaving, and the run streamed as one (:class:`ResponseStream`).

Starlette's StreamingResponse on ASGI 2.4 servers (uvicorn) only learns of a disconnect when a
write fails, and uvicorn silently drops writes to a closed connection: an idle stream would then
live until its run ends. This response listens for ``http.disconnect`` and cancels the producer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sized
from typing import TypeVar, cast

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from . import sse
from .connection import abort as abort_connection
from .follow import EventStream
from .problem import HttpProblem, from_problem, problem_for

log = logging.getLogger("loopgate.http")
Write = Callable[[bytes], Awaitable[None]]
# ``produce(opened, write)``: opens what it streams (e.g. a subscription), awaits ``opened()``
# (the status line goes out), then writes the body.
Produce = Callable[[Callable[[], Awaitable[None]], Write], Awaitable[None]]
# How long the end of a body may wait on a client that may not be reading at all.
FINAL_WRITE_S = 1.0
W = TypeVar("W")
B = TypeVar("B", bound=Sized)


class StreamResponse(Response):
    """Streams what ``produce`` writes. Whatever fails before ``opened()`` (a missing run, a
    full run) is answered with ``refuse(problem)`` instead (default: the problem response of
    RFC 9457; a protocol with an error shape of its own passes its own); ``on_disconnect`` runs
    when the client leaves before the end."""

    def __init__(
        self,
        produce: Produce,
        *,
        media_type: str = sse.MEDIA_TYPE,
        headers: Mapping[str, str] | None = None,
        on_disconnect: Callable[[], Awaitable[None]] | None = None,
        refuse: Callable[[HttpProblem], Response] = from_problem,
    ) -> None:
        self.produce = produce
        self.on_disconnect = on_disconnect
        self.refuse = refuse
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers({**sse.HEADERS, **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = started = False

        async def opened() -> None:
            nonlocal started
            status, headers = self.status_code, self.raw_headers
            await send({"type": "http.response.start", "status": status, "headers": headers})
            started = True

        async def write(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        # The watcher is stopped by its own scope, not the group's: a child task that ends
        # cancelled leaves a reference cycle in anyio (its CancelledError's traceback holds the
        # frame that holds it), and with it this request's whole connection, until the cyclic
        # collector comes. One that returns leaves nothing.
        watching = anyio.CancelScope()
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    nonlocal disconnected
                    with watching:
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        disconnected = True
                        tg.cancel_scope.cancel()

                tg.start_soon(watch)
                await self.produce(opened, write)
                watching.cancel()
        except Exception as exc:
            # One exception from the producer comes wrapped by the task group.
            cause = _single(exc)
            problem = problem_for(cause)
            if problem is None or started:
                log.error("event stream %s failed", scope.get("path"), exc_info=cause)
                return
            await self.refuse(problem)(scope, receive, send)
            return
        if disconnected:
            if self.on_disconnect is not None:
                with anyio.CancelScope(shield=True):
                    await self.on_disconnect()
            return
        with anyio.move_on_after(FINAL_WRITE_S) as final:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        if final.cancelled_caught:
            # The client stopped reading (a subscriber cut off, most often): the response
            # cannot be finished, so the connection goes now, as expected, not as an error.
            abort_connection(scope)


def _single(exc: Exception) -> Exception:
    found = exc
    while isinstance(found, ExceptionGroup):
        inner: tuple[Exception, ...] = cast("ExceptionGroup[Exception]", found).exceptions
        if len(inner) != 1:
            break
        found = inner[0]
    return found


class ResponseStream(EventStream[W, B]):
    """A run streamed as the body of one HTTP response (:class:`StreamResponse`): its status
    line goes out once the run's subscription is open, ``encode`` makes each batch's bytes,
    and a quiet stream gets an SSE comment."""

    _opened: Callable[[], Awaitable[None]]
    _write: Write

    def response(
        self,
        *,
        media_type: str = sse.MEDIA_TYPE,
        headers: Mapping[str, str] | None = None,
        on_disconnect: Callable[[], Awaitable[None]] | None = None,
        refuse: Callable[[HttpProblem], Response] = from_problem,
    ) -> StreamResponse:
        """The response streaming this run (the options are :class:`StreamResponse`'s)."""
        return StreamResponse(
            self._produce,
            media_type=media_type,
            headers=headers,
            on_disconnect=on_disconnect,
            refuse=refuse,
        )

    def encode(self, messages: list[W]) -> bytes:
        """The bytes of ``messages`` on the wire (the adapter's ``render``)."""
        raise NotImplementedError

    async def open(self) -> None:
        await self._opened()

    async def send(self, messages: list[W]) -> None:
        await self._write(self.encode(messages))

    async def keepalive(self) -> None:
        await self._write(sse.KEEPALIVE)

    async def _produce(self, opened: Callable[[], Awaitable[None]], write: Write) -> None:
        self._opened, self._write = opened, write
        try:
            await self.run()
        finally:
            # The response's closures hold the response, which holds this stream: a cycle
            # (and the connection with it) until the collector came, were they kept.
            del self._opened, self._write
