"""``/mcp``: MCP over streamable HTTP, stateless.

Each request is served on its own by the SDK's session manager in stateless mode: no
``Mcp-Session-Id``, no server state between requests, so any gateway process can answer any
request and a client that reconnects loses nothing. A ``tools/call`` of ``run`` answers with
an SSE stream: its progress notifications, then its result. What a stateless server cannot
do, this one does not need: it sends clients no requests of its own, and a standalone GET
stream would carry nothing (GET and DELETE are 405). A client that hangs up on a ``run``
cancels its run; so does a ``notifications/cancelled`` for it, POSTed on its own to any
instance, in the session :mod:`adapters.mcp.sessions` gives each client.

The gateway's middleware guards the path like every other: the bearer token, the Host check
(DNS rebinding) and the Origin check of every POST, which the MCP transport asks of servers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from ...contracts.limits import EndpointLimits
from ...contracts.ports import Forbidden, RunNotFound, RunService
from ...contracts.principal import Owner, current
from ..shared.lazy import LazyModule
from .sessions import (
    SESSION_HEADER,
    new_session_id,
    peek,
    run_id_for,
    session_of,
)

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

PATH = "/mcp"
JSON = "application/json"
# How long a cancellation waits for the run's owner to take it (it may be another instance).
CANCEL_TIMEOUT_S = 5.0
log = logging.getLogger("loopgate.mcp")


class Call(NamedTuple):
    """A ``run`` call in progress here: its scope, and who made it."""

    scope: anyio.CancelScope
    owner: Owner


class Refusal(NamedTuple):
    """An HTTP status and the JSON-RPC error that goes with it."""

    status: int
    error: dict[str, Any]


class McpEndpoint:
    """The ASGI app at ``/mcp``: a session manager per request (it is single-use, and a
    stateless one holds nothing worth keeping). The SDK and the server are loaded by the
    first request (adapters.shared.lazy)."""

    def __init__(
        self, build: Callable[[], Server[Any]], service: RunService, limits: EndpointLimits
    ) -> None:
        self._build = build
        self.service = service
        # Each ``run`` call this process serves, by the run's id: a cancellation that reaches
        # this process ends its call here at once (sessions.run_id_for), if it comes from
        # someone who may cancel the call's run.
        self._calls: dict[str, Call] = {}
        self._server: Server[Any] | None = None
        self._lock = anyio.Lock()
        self._server_module = LazyModule("loopgate.adapters.mcp.server")
        self._manager_module = LazyModule("mcp.server.streamable_http_manager")
        self._messages = LazyModule("loopgate.adapters.mcp.messages")
        self.limits = limits

    async def _loaded(self) -> Server[Any]:
        async with self._lock:
            if self._server is None:
                await self._server_module.get()
                self._server = self._build()
        return self._server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = self._server if self._server is not None else await self._loaded()
        messages = await self._messages.get()
        headers = Headers(scope=scope)
        body, receive = await buffered(receive, self.limits.max_body_bytes)
        checked = self._checked(messages, headers, body)
        if isinstance(checked, Refusal):
            await JSONResponse(checked.error, checked.status)(scope, receive, send)
            return
        message = peek(checked)
        session = session_of(headers)
        if session is None:
            if message.method == "initialize":
                send = with_header(send, SESSION_HEADER, new_session_id())
        elif message.cancels is not None:
            await self._cancel(run_id_for(session, message.cancels))
        elif message.runs is not None:
            await self._call(server, run_id_for(session, message.runs), scope, receive, send)
            return
        await self._serve(server, scope, receive, send)

    def _checked(
        self, messages: ModuleType, headers: Headers, body: bytes | None
    ) -> bytes | Refusal:
        """The body of a POST the SDK may have, or how the transport refuses it (checked by
        adapters.mcp.messages): the SDK would answer with its own text, some of it pydantic's."""
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != JSON:
            detail = f"Content-Type must be {JSON}, got {media_type or 'none'!r}"
            return Refusal(415, messages.invalid_request(detail))
        if body is None:
            detail = f"request body is larger than the limit of {self.limits.max_body_bytes} bytes"
            return Refusal(413, messages.invalid_request(detail))
        error = messages.refusal(body, self.limits.max_json_depth)
        return body if error is None else Refusal(400, error)

    async def _serve(self, server: Server[Any], scope: Scope, receive: Receive, send: Send) -> None:
        sdk = await self._manager_module.get()
        manager = sdk.StreamableHTTPSessionManager(
            app=server,
            stateless=True,
            max_request_body_size=self.limits.max_body_bytes,
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    async def _call(
        self, server: Server[Any], run_id: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A ``run`` call, which its client may cancel: then the call's stream ends there,
        with no more messages for the call and no answer (the spec: a cancelled request is
        not answered; the SDK clients have forgotten it), and its run is cancelled (the
        handler's cancellation does that, as when a client hangs up)."""
        if run_id in self._calls:  # an id the client used twice: only the first is named
            await self._serve(server, scope, receive, send)
            return
        response = Response(send)
        with anyio.CancelScope() as call:
            self._calls[run_id] = Call(call, current().owner)
            try:
                await self._serve(server, scope, receive, response.send)
            finally:
                del self._calls[run_id]
        if call.cancelled_caught:
            await response.end()

    async def _cancel(self, run_id: str) -> None:
        """The client cancelled the call that started ``run_id``: end the call if this
        process serves it, and cancel the run, wherever it runs. A call that started no run
        (another tool, or one that has ended) is no error: the spec has the receiver ignore a
        cancellation it cannot apply."""
        call = self._calls.get(run_id)
        if call is not None:
            # The session id is no credential (anyone who saw it may send it): the call ends
            # only for its own caller or an admin, as the run service would judge its run.
            principal = current()
            if not (principal.sees(call.owner) and principal.may("control")):
                return
            call.scope.cancel()
        with anyio.move_on_after(CANCEL_TIMEOUT_S):
            try:
                await self.service.cancel(run_id)
            except (RunNotFound, Forbidden):
                pass  # not a run of the caller's: nothing to cancel, as for any unknown id
            except Exception:
                log.warning("could not cancel run %s for its MCP client", run_id, exc_info=True)


async def buffered(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """The request's body (None past ``limit`` bytes, or cut short), and a
    ``receive`` that hands it on as if nobody had read it."""
    chunks: list[bytes] = []
    size = 0
    first: Message | None = None
    more = True
    while more and size <= limit:
        message = await receive()
        if message["type"] != "http.request":
            first = message
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = message.get("more_body", False)
    body = b"".join(chunks)
    replay: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]
    if first is not None:
        replay.append(first)

    async def replayed() -> Message:
        return replay.pop(0) if replay else await receive()

    whole = not more and first is None and size <= limit
    return (body if whole else None), replayed


class Response:
    """An HTTP response as it goes out, so that one cut short can be ended properly."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        self.ended = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        await self._send(message)

    async def end(self) -> None:
        """End the response where it is: an SSE stream with no more events."""
        if not self.started:
            headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
            await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        if not self.ended:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})


def with_header(send: Send, name: str, value: str) -> Send:
    """``send`` with one more header on a successful response."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 200:
            MutableHeaders(scope=message).append(name, value)
        await send(message)

    return sending


def routes(
    build: Callable[[], Server[Any]], service: RunService, limits: EndpointLimits
) -> list[BaseRoute]:
    """``build`` makes the MCP server, on the first request."""
    # POST only: GET (a stream for messages the server sends unprompted) and DELETE (a
    # session's end) are 405, as the transport allows a server that has neither.
    return [Route(PATH, McpEndpoint(build, service, limits), methods=["POST"])]
