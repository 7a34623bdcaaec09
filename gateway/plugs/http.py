"""A loop behind an HTTP endpoint, in any language: ``--loop-url URL``.

Per run the gateway POSTs the :class:`contracts.loop.LoopRequest` as JSON (its ``principal``
says who asked; the caller's credential is never forwarded, only ``--loop-token``) and reads the
response, one ``{"kind", "data"}`` object per line (``application/x-ndjson``), up to the
terminal completion. Closing the connection cancels. Commands go to ``URL/commands`` as JSON:
``{"type": "cancel" | "steer" | "respond", "run_id", …}``; a loop without that endpoint
(404) still runs, but cannot be steered and is cancelled by closing its connection.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import httpx

from ...contracts.client_errors import client_message
from ...contracts.loop import Emit, LoopFault, RunContext
from ...contracts.ports import LimitReached, RunFinished
from .source import is_terminal
from .wire import (
    BoundedLines,
    Cut,
    decode,
    encode,
    encode_request,
    event_parts,
    line_too_long,
    relay_permission,
)

log = logging.getLogger("loopgate.loop.http")

NDJSON_TYPES = frozenset(
    {"application/x-ndjson", "application/ndjson", "application/jsonl", "application/json-lines"}
)
_NO_COMMANDS = frozenset({404, 405, 501})


class HttpLoop:
    """Implements :class:`contracts.loop.AgentLoop` over HTTP."""

    untrusted = True
    # Whether another instance may resume its runs (--loop-resumable): not unless it says.
    resumable = False

    def __init__(
        self,
        url: str,
        *,
        connect_timeout_s: float,
        max_line_bytes: int,
        token: str | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--loop-url must be an http:// or https:// URL, got {url!r}")
        self.url = url
        self.commands_url = url.rstrip("/") + "/commands"
        self.name = f"http:{url}"
        self.connect_timeout_s = connect_timeout_s
        self.max_line_bytes = max_line_bytes
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # A run holds its connection for as long as it streams; max_active_runs bounds them.
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.connect_timeout_s, read=None),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
                headers=self.headers,
            )
        return self._client

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def open(self, ctx: RunContext) -> HttpRun:
        return HttpRun(self, ctx)

    async def command(self, body: dict[str, Any]) -> str | None:
        """POST a command; a string is why the loop did not take it."""
        try:
            response = await self.client.post(
                self.commands_url,
                content=encode(body),
                headers={"content-type": "application/json"},
                timeout=self.connect_timeout_s,
            )
        except httpx.HTTPError as exc:
            log.warning("command %s to %s failed: %r", body.get("type"), self.commands_url, exc)
            return "the loop could not be reached"
        if response.is_success:
            return None
        if response.status_code in _NO_COMMANDS:
            return f"this loop takes no {body.get('type')} commands"
        return f"the loop refused the {body.get('type')} command (HTTP {response.status_code})"


class HttpRun:
    def __init__(self, loop: HttpLoop, ctx: RunContext) -> None:
        self.loop = loop
        self.ctx = ctx
        self.cancel_requested = anyio.Event()
        self.fault: LoopFault | None = None

    async def run(self, emit: Emit) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._relay_cancel, tg.cancel_scope)
            try:
                await self._stream(emit, tg)
            except LoopFault as fault:
                self.fault = self.fault or fault
            except (RunFinished, LimitReached):
                pass  # the hub ended the run (a limit); leaving the task group must not wrap it
            tg.cancel_scope.cancel()
        if self.fault is not None:
            raise self.fault

    async def _stream(self, emit: Emit, tg: anyio.abc.TaskGroup) -> None:
        request = self.ctx.request
        headers = {"content-type": "application/json", "accept": "application/x-ndjson"}
        if request.traceparent:
            headers["traceparent"] = request.traceparent
            if request.tracestate:
                headers["tracestate"] = request.tracestate
        loop = self.loop
        try:
            async with loop.client.stream(
                "POST", loop.url, content=encode_request(request), headers=headers
            ) as response:
                self._check(response)
                splitter = BoundedLines(loop.max_line_bytes)
                count = 0
                async for chunk in response.aiter_bytes():
                    for line in splitter.feed(chunk):
                        if isinstance(line, Cut):
                            raise line_too_long("the loop", loop.max_line_bytes)
                        if line.strip():
                            count += 1
                            if self._handle(line, count, emit, tg):
                                return
                if splitter.pending.strip():
                    self._handle(splitter.pending, count + 1, emit, tg)
        except httpx.TimeoutException:
            raise LoopFault(
                "loop_unavailable",
                f"the loop did not accept the request within {loop.connect_timeout_s:g} s",
            ) from None
        except httpx.ConnectError as exc:
            log.warning("cannot reach the loop at %s: %r", loop.url, exc)
            raise LoopFault("loop_unavailable", "the loop could not be reached") from None
        except httpx.HTTPError as exc:
            log.warning("the connection to the loop at %s broke: %r", loop.url, exc)
            raise LoopFault("loop_disconnected", "the connection to the loop broke") from None

    def _check(self, response: httpx.Response) -> None:
        if not response.is_success:
            raise LoopFault("loop_error", f"the loop answered HTTP {response.status_code}")
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in NDJSON_TYPES:
            raise LoopFault(
                "loop_bad_response",
                f"the loop answered {media or 'no content type'}, not application/x-ndjson",
            )

    def _handle(self, line: bytes, number: int, emit: Emit, tg: anyio.abc.TaskGroup) -> bool:
        """Emit one line's event; True once the run's terminal event went out."""
        try:
            value = decode(line)
        except ValueError as exc:
            detail = client_message(exc) or "not JSON"
            raise LoopFault("loop_invalid_event", f"event {number}: {detail}") from None
        kind, data = event_parts(value, number)
        if kind == "permission_request":
            tg.start_soon(self._ask, data, tg.cancel_scope)
            return False
        emit(kind, data)
        return is_terminal(kind, data)

    async def _ask(self, data: dict[str, Any], scope: anyio.CancelScope) -> None:
        async def answer(fields: dict[str, Any]) -> None:
            refusal = await self.loop.command(
                {"type": "respond", "run_id": self.ctx.run_id, **fields}
            )
            if refusal is not None:
                log.warning("run %s: permission answer not taken: %s", self.ctx.run_id, refusal)

        try:
            await relay_permission(self.ctx, data, answer)
        except LoopFault as fault:
            self.fault = self.fault or fault
            scope.cancel()

    async def _relay_cancel(self, scope: anyio.CancelScope) -> None:
        await self.cancel_requested.wait()
        refusal = await self.loop.command({"type": "cancel", "run_id": self.ctx.run_id})
        if refusal is not None:
            scope.cancel()  # no command endpoint: closing the connection is the cancel

    def cancel(self) -> None:
        self.cancel_requested.set()

    async def steer(self, content: str) -> str | None:
        return await self.loop.command(
            {"type": "steer", "run_id": self.ctx.run_id, "content": content}
        )
