"""The run context a remote loop keeps for itself: what the HTTP and stdio sample servers give
:func:`tests.plugs.sample_loop.sample`, fed by the commands the gateway sends them."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

Send = Callable[[dict[str, Any]], Awaitable[None]]


class RemoteContext:
    def __init__(self, request: dict[str, Any], send: Send) -> None:
        self.request = request
        self.run_id: str = request["run_id"]
        self.thread_id: str = request["thread_id"]
        self.input: str = request["input"]
        self.input_parts: list[dict[str, Any]] = request.get("input_parts", [])
        self.messages: list[dict[str, Any]] = request["messages"]
        self.tools: list[dict[str, Any]] = request["tools"]
        self.config: dict[str, Any] = request["config"]
        self._send = send
        self._cancel = anyio.Event()
        self._steers: list[str] = []
        self._answers: dict[str, tuple[anyio.Event, list[str]]] = {}
        self._ids = itertools.count(1)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    async def wait_cancelled(self) -> None:
        await self._cancel.wait()

    def take_steers(self) -> list[str]:
        taken, self._steers = self._steers, []
        return taken

    async def ask_permission(
        self, tool_call: dict[str, Any], *, options: Any = None, request_id: str | None = None
    ) -> str:
        request_id = request_id or f"p{next(self._ids)}"
        answered, decision = self._answers[request_id] = (anyio.Event(), [])
        await self._send(
            {"kind": "permission_request", "data": {"requestId": request_id, "toolCall": tool_call}}
        )
        await answered.wait()
        return decision[0]

    def command(self, kind: str, params: dict[str, Any]) -> None:
        """``cancel``, ``steer`` or ``respond`` from the gateway."""
        if kind == "cancel":
            self._cancel.set()
        elif kind == "steer":
            self._steers.append(params["content"])
        elif kind == "respond":
            answered, decision = self._answers.pop(params["request_id"])
            decision.append(params["decision"])
            answered.set()
