"""The run context a loop sees: its request, cancellation, steering and permission questions."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import msgspec

from ...contracts.client_errors import ClientError
from ...contracts.loop import LoopPrincipal, LoopRequest

DEFAULT_MAX_STEER_CHARS = 32_000
# Steering messages a loop has not taken yet; beyond this a client is told to wait.
MAX_QUEUED_STEERS = 64

Ask = Callable[[Mapping[str, Any], Sequence[str] | None, str | None], Awaitable[str]]


class RequestView:
    """What a loop reads of its run request, the same in every run context."""

    def __init__(self, request: LoopRequest) -> None:
        self._request = request
        self._messages: list[dict[str, Any]] | None = None
        self._tools: list[dict[str, Any]] | None = None

    @property
    def request(self) -> LoopRequest:
        return self._request

    @property
    def run_id(self) -> str:
        return self._request.run_id

    @property
    def thread_id(self) -> str:
        return self._request.thread_id

    @property
    def input(self) -> str:
        return self._request.input

    @property
    def input_parts(self) -> list[dict[str, Any]]:
        """The new message's parts as plain dicts when it has attachments (else empty):
        ``{"type": "image", "media_type", "data" (base64), "size"}``, ``{"type": "text", …}``…"""
        parts: list[dict[str, Any]] = msgspec.to_builtins(self._request.input_parts)
        return parts

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self._messages is None:
            messages: list[dict[str, Any]] = msgspec.to_builtins(self._request.messages)
            self._messages = messages
        return self._messages

    @property
    def tools(self) -> list[dict[str, Any]]:
        if self._tools is None:
            tools: list[dict[str, Any]] = msgspec.to_builtins(self._request.tools)
            self._tools = tools
        return self._tools

    @property
    def config(self) -> dict[str, Any]:
        return self._request.config

    @property
    def principal(self) -> LoopPrincipal:
        return self._request.principal

    @property
    def attempt(self) -> int:
        return self._request.attempt

    @property
    def events(self) -> list[dict[str, Any]]:
        return self._request.events


class GatewayRunContext(RequestView):
    """Implements :class:`contracts.loop.RunContext` for one run."""

    def __init__(self, request: LoopRequest, ask: Ask, on_change: Callable[[], None]) -> None:
        super().__init__(request)
        self._ask = ask
        # Called when cancellation is requested or a permission question opens or closes: the
        # run's watchdog re-reads its deadlines then.
        self._on_change = on_change
        self._cancelled = anyio.Event()
        self._steers: deque[str] = deque()
        self._steer_waiter: anyio.Event | None = None
        self.asking = 0
        # While a plug still reaches its loop (TracksReaching), and when it last got there.
        self.reaching_loop = 0
        self.reached_at: float | None = None
        limit = request.config.get("max_steer_chars")
        self.max_steer_chars = (
            limit if type(limit) is int and limit > 0 else DEFAULT_MAX_STEER_CHARS
        )

    # --- what the loop reads ---------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    async def wait_cancelled(self) -> None:
        await self._cancelled.wait()

    def take_steers(self) -> list[str]:
        taken = list(self._steers)
        self._steers.clear()
        return taken

    async def next_steer(self) -> str:
        while not self._steers:
            if self._steer_waiter is None:
                self._steer_waiter = anyio.Event()
            await self._steer_waiter.wait()
        return self._steers.popleft()

    async def ask_permission(
        self,
        tool_call: Mapping[str, Any],
        *,
        options: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> str:
        self.asking += 1
        self._on_change()
        try:
            return await self._ask(tool_call, options, request_id)
        finally:
            self.asking -= 1
            self._on_change()

    @contextmanager
    def reaching(self) -> Iterator[None]:
        self.reaching_loop += 1
        self._on_change()
        try:
            yield
        finally:
            self.reaching_loop -= 1
            self.reached_at = time.monotonic()
            self._on_change()

    # --- what the gateway does to it -------------------------------------------------------

    def cancel(self) -> None:
        if not self._cancelled.is_set():
            self._cancelled.set()
            self._on_change()

    def check_steer(self, content: str) -> None:
        """``ValueError`` (the client's 422) for a message no loop should be handed."""
        if not isinstance(content, str) or not content.strip():
            raise ClientError("steering message must be a non-empty string")
        if len(content) > self.max_steer_chars:
            raise ClientError(
                f"steering message is {len(content)} characters; the limit is "
                f"{self.max_steer_chars}"
            )

    def queue_steer(self, content: str) -> str | None:
        """Hand a steering message to an in-process loop; a string is why it was not taken."""
        if len(self._steers) >= MAX_QUEUED_STEERS:
            return f"the loop has not taken the last {MAX_QUEUED_STEERS} steering messages yet"
        self._steers.append(content)
        waiter, self._steer_waiter = self._steer_waiter, None
        if waiter is not None:
            waiter.set()
        return None
