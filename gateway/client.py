"""A :class:`contracts.ports.RunService` over a running gateway's native HTTP API.

Lets a process that speaks some protocol (``loopgate acp --server URL``) serve runs that live
in another gateway: start = ``POST /v1/runs``, watch = the SSE stream of
``GET /v1/runs/{id}/events`` (resumed with ``Last-Event-ID`` when the connection drops),
commands = ``POST /v1/runs/{id}/cancel|steer|respond``, thread records = ``/v1/threads``.
Problem responses become the port's exceptions, so callers cannot tell it from the in-process
hub.

The SSE parsing is a few lines here rather than a dependency: the gateway's own framing is
fixed (``id`` and one ``data`` line per event), and only the data is read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
import msgspec

from ..contracts.agents import AgentInfo
from ..contracts.client_errors import ClientError, describe_input_error
from ..contracts.contract import is_terminal_completion
from ..contracts.envelope import Envelope, EnvelopeError, LoopEvent, decode_envelope
from ..contracts.ports import (
    CommandResult,
    LimitReached,
    RunExists,
    RunFinished,
    RunInfo,
    RunNotFound,
    RunNotIngest,
    ServiceUnavailable,
    StartRun,
    ThreadExists,
    ThreadInfo,
)

JSON = "application/json"
_T = TypeVar("_T")


class RemoteError(Exception):
    """The gateway answered something the port has no exception for (auth, 5xx, garbage)."""


class GatewayUnreachable(RemoteError, ServiceUnavailable):
    """No answer from the gateway at all: refused, timed out, or the connection broke."""


class _Stream:
    """One subscriber over SSE: a reader task fills a bounded buffer; ``next_batch`` drains it."""

    # The Subscription protocol's; nothing watches it here (a remote stream's reader bounds
    # its own writes).
    write_deadline: float | None = None

    def __init__(self, service: RemoteService, run_id: str, after: int, max_batch: int) -> None:
        self.service = service
        self.run_id = run_id
        self._cursor = after
        self._received = after
        self._done = False
        self.max_batch = max_batch
        self.send, self.receive = anyio.create_memory_object_stream[Envelope | Exception](
            service.buffer_events
        )

    @property
    def cursor(self) -> int:
        return self._cursor

    @property
    def done(self) -> bool:
        return self._done

    async def next_batch(self, max_wait: float | None = None) -> list[Envelope]:
        if self._done:
            return []
        batch: list[Envelope] = []
        with anyio.move_on_after(max_wait):
            batch.append(self._check(await self.receive.receive()))
        while batch and len(batch) < self.max_batch and not self._done:
            try:
                batch.append(self._check(self.receive.receive_nowait()))
            except anyio.WouldBlock:
                break
        if batch:
            self._cursor = batch[-1].seq
        return batch

    def _check(self, item: Envelope | Exception) -> Envelope:
        if isinstance(item, Exception):
            raise item
        if is_terminal_completion(item.kind, item.data):
            self._done = True
        return item

    async def read(self) -> None:
        """Follow the stream, reconnecting after drops, until the terminal event is queued."""
        failures = 0
        try:
            while True:
                try:
                    if await self._read_once():
                        return
                    failures = 0
                except (httpx.TransportError, httpx.StreamError) as exc:
                    failures += 1
                    if failures > self.service.max_reconnects:
                        # In words chosen by the exception's type, never its text.
                        why = unreachable(self.service.base_url, exc)
                        raise GatewayUnreachable(
                            f"lost the event stream of run {self.run_id!r}: {why}; gave up "
                            f"after {failures - 1} retries"
                        ) from None
                    await anyio.sleep(min(0.1 * 2**failures, 5.0))
        except Exception as exc:
            await self.send.send(exc)

    async def _read_once(self) -> bool:
        headers = {"accept": "text/event-stream", "last-event-id": str(self._received)}
        client = self.service.client
        async with client.stream(
            "GET",
            f"/v1/runs/{self.run_id}/events",
            headers=headers,
            timeout=self.service.sse_timeout,
        ) as response:
            if response.status_code != 200:
                await response.aread()
                raise_for_problem(response, self.run_id)
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    env = _decode("\n".join(data))
                    data = []
                    if env.seq <= self._received:
                        continue
                    self._received = env.seq
                    await self.send.send(env)
                    if is_terminal_completion(env.kind, env.data):
                        return True
        return False  # the server closed without the terminal event: resume


def unreachable(base_url: str, exc: Exception) -> str:
    """Why the gateway at ``base_url`` gave no answer, in words (not the exception's text)."""
    if isinstance(exc, httpx.ConnectError):
        why = "nothing answers there (is `loopgate serve` running?)"
    elif isinstance(exc, httpx.TimeoutException):
        why = "it did not answer in time"
    else:
        why = "the connection failed"
    return f"cannot reach the gateway at {base_url}: {why}"


def _decode(raw: str) -> Envelope:
    try:
        return decode_envelope(raw)
    except EnvelopeError as exc:
        raise RemoteError(f"the gateway sent an invalid event: {exc.message}") from None


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else f"HTTP {response.status_code}"


def raise_for_problem(response: httpx.Response, run_id: str | None = None) -> None:
    status = response.status_code
    if status < 400:
        return
    detail = _detail(response)
    if status == 404 and run_id is not None:
        raise RunNotFound(run_id)
    if status in (429, 503):
        retry = response.headers.get("retry-after", "1")
        seconds = int(retry) if retry.isascii() and retry.isdigit() and len(retry) < 7 else 1
        raise LimitReached(detail, seconds)
    if status == 409 and run_id is not None:
        if "already exists" in detail:
            raise RunExists(run_id)
        if "produced by" in detail:
            raise RunNotIngest(detail)
        raise RunFinished(run_id, None)
    if status in (400, 422):
        raise ClientError(detail)
    raise RemoteError(f"the gateway answered {status}: {detail}")


class RemoteService:
    """``RunService`` over HTTP; use as an async context manager (it owns an httpx client)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        buffer_events: int = 1024,
        max_batch: int = 512,
        max_reconnects: int = 5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport
        )
        # Streams are quiet between events (keep-alives arrive every 15 s by default).
        self.sse_timeout = httpx.Timeout(timeout_s, read=None)
        self.buffer_events = buffer_events
        self.max_batch = max_batch
        self.max_reconnects = max_reconnects

    async def __aenter__(self) -> RemoteService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.aclose()

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise GatewayUnreachable(unreachable(self.base_url, exc)) from None

    async def _json(self, method: str, path: str, run_id: str | None = None, **kwargs: Any) -> Any:
        response = await self._send(method, path, **kwargs)
        raise_for_problem(response, run_id)
        return _body(response, method, path)

    async def start(self, request: StartRun) -> RunInfo:
        if request.client_tools:
            raise ClientError("client tools cannot be offered through the gateway's HTTP API")
        body = msgspec.to_builtins(request)  # defaults omitted: the server fills them in
        body.pop("traceparent", None)
        body.pop("tracestate", None)
        body.pop("replay_pace", None)
        body.pop("exclusive", None)  # the gateway's own thread rule decides it there
        if request.source == "replay":
            body.pop("source", None)
            body["pace"] = request.replay_pace
        headers = {"traceparent": request.traceparent} if request.traceparent else {}
        if request.traceparent and request.tracestate:
            headers["tracestate"] = request.tracestate
        data = await self._json("POST", "/v1/runs", request.run_id, json=body, headers=headers)
        return _run_info(data)

    async def agents(self) -> list[AgentInfo]:
        response = await self._send("GET", "/v1/agents")
        if response.status_code == 404:
            return []  # a gateway from before agents were named: its one loop
        raise_for_problem(response, None)
        listed = _described(_body(response, "GET", "/v1/agents"), AgentList, "agent list")
        return listed.agents

    async def get(self, run_id: str, *, attachments: bool = False) -> RunInfo:
        # The gateway's GET /v1/runs/{id} has the bytes: asked for or not, they come.
        return _run_info(await self._json("GET", f"/v1/runs/{run_id}", run_id))

    async def list_runs(self, *, limit: int = 100, thread_id: str | None = None) -> list[RunInfo]:
        params: dict[str, Any] = {"limit": max(1, min(limit, 1000))}
        if thread_id is not None:
            params["thread_id"] = thread_id
        data = await self._json("GET", "/v1/runs", params=params)
        return [_run_info(r) for r in data.get("runs", [])]

    async def _command(self, run_id: str, name: str, body: dict[str, Any] | None) -> CommandResult:
        data = await self._json("POST", f"/v1/runs/{run_id}/{name}", run_id, json=body)
        return msgspec.convert(data, CommandResult)

    async def cancel(self, run_id: str) -> CommandResult:
        return await self._command(run_id, "cancel", None)

    async def steer(self, run_id: str, content: str) -> CommandResult:
        return await self._command(run_id, "steer", {"content": content})

    async def respond(self, run_id: str, request_id: str, decision: str) -> CommandResult:
        return await self._command(
            run_id, "respond", {"request_id": request_id, "decision": decision}
        )

    async def push(self, run_id: str, event: LoopEvent) -> Envelope:
        line = msgspec.json.encode({"kind": event.kind, "data": event.data}) + b"\n"
        data = await self._json(
            "POST",
            f"/v1/runs/{run_id}/events",
            run_id,
            content=line,
            headers={"content-type": "application/x-ndjson"},
        )
        seq = data.get("last_seq")
        events = await self.history(run_id, after=seq - 1, limit=1) if seq else []
        if not events:
            raise RemoteError(f"the gateway accepted the event but has no seq {seq}")
        return events[0]

    async def push_nowait(self, run_id: str, event: LoopEvent) -> Envelope:
        # The gateway answers an ingest push only once it is committed: nothing to share.
        return await self.push(run_id, event)

    async def wait_committed(self, run_id: str, seq: int) -> None:
        return None  # every push above returned after its commit

    async def end_ingest(self, run_id: str) -> None:
        await self._json(
            "POST",
            f"/v1/runs/{run_id}/events",
            run_id,
            params={"end": "1"},
            content=b"",
            headers={"content-type": "application/x-ndjson"},
        )

    def command_channel(self, run_id: str) -> Any:
        raise NotImplementedError(
            "commands for an external loop are relayed over the gateway's ingest WebSocket "
            f"(/v1/runs/{run_id}/ingest), not this client"
        )

    async def release_thread(self, thread_id: str) -> None:
        return None  # the gateway's own clients hold no thread resources over HTTP

    async def create_thread(
        self, thread_id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> ThreadInfo:
        body: dict[str, Any] = {"metadata": metadata or {}}
        if thread_id is not None:
            body["id"] = thread_id
        response = await self._send("POST", "/v1/threads", json=body)
        if response.status_code == 409:
            raise ThreadExists(thread_id or "")
        raise_for_problem(response)
        return _thread_info(_body(response, "POST", "/v1/threads"))

    async def get_thread(self, thread_id: str) -> ThreadInfo | None:
        if not _addressable(thread_id):
            return None
        path = _thread_path(thread_id)
        response = await self._send("GET", path)
        if response.status_code == 404:
            return None
        raise_for_problem(response)
        return _thread_info(_body(response, "GET", path))

    async def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        params = {"limit": max(1, min(limit, 1000))}
        data = await self._json("GET", "/v1/threads", params=params)
        threads = data.get("threads") if isinstance(data, dict) else None
        return [_thread_info(t) for t in threads or []]

    async def forget_thread(self, thread_id: str) -> bool:
        if not _addressable(thread_id):
            return False
        response = await self._send("DELETE", _thread_path(thread_id))
        if response.status_code == 404:
            return False
        raise_for_problem(response)
        return True

    async def history(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Envelope]:
        """The events so far (a running run is read up to its current last seq)."""
        info = await self.get(run_id)
        end = info.last_seq if limit is None else min(info.last_seq, after + limit)
        if end <= after:
            return []
        events: list[Envelope] = []
        async with self.subscribe(run_id, after=after, consumer="history") as sub:
            while not sub.done and (not events or events[-1].seq < end):
                events.extend(await sub.next_batch(None))
        return [e for e in events if e.seq <= end]

    @asynccontextmanager
    async def subscribe(
        self, run_id: str, *, after: int = 0, consumer: str = "api"
    ) -> AsyncIterator[_Stream]:
        await self.get(run_id)  # RunNotFound on entry, as the hub does
        stream = _Stream(self, run_id, after, self.max_batch)
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream.read)
            try:
                yield stream
            finally:
                tg.cancel_scope.cancel()


def _addressable(thread_id: str) -> bool:
    """Whether a URL path can name the thread: the gateway decodes an escaped "/" before it
    routes. It records no such id over HTTP, nor an empty one."""
    return bool(thread_id) and "/" not in thread_id


def _thread_path(thread_id: str) -> str:
    # One path segment: every reserved character escaped, and dots too, which httpx would
    # otherwise resolve ("/v1/threads/.." is "/v1").
    return "/v1/threads/" + quote(thread_id, safe="").replace(".", "%2E")


def _body(response: httpx.Response, method: str, path: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise RemoteError(f"the gateway sent a non-JSON answer to {method} {path}") from None


def _described(data: Any, kind: type[_T], what: str) -> _T:
    """The gateway's JSON as ``kind``; RemoteError naming ``what`` when it is not one."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        detail = describe_input_error(exc)
        raise RemoteError(f"the gateway sent an unexpected {what} description: {detail}") from None


class AgentList(msgspec.Struct):
    agents: list[AgentInfo]


def _thread_info(data: Any) -> ThreadInfo:
    return _described(data, ThreadInfo, "thread")


def _run_info(data: Any) -> RunInfo:
    return _described(data, RunInfo, "run")
