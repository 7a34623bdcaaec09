"""Tool approval through the hub: the loop asks, any subscribed client answers."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Literal

import anyio

from contracts.gateway_events import (
    DECISIONS,
    PERMISSION_REQUEST,
    PERMISSION_RESULT,
    Decision,
)
from contracts.messages import ToolCall
from gateway.loop.tools import DemoTools
from gateway.loop.types import PermissionDecision

if TYPE_CHECKING:
    from gateway.hub import Hub, Run

ApprovalMode = Literal["auto", "always", "never"]


class RememberedDecisions:
    """``allow_always`` / ``reject_always`` answers per thread (an ACP session spans runs).

    Bounded: the least recently used threads are forgotten first.
    """

    def __init__(self, max_threads: int = 1024) -> None:
        self.max_threads = max_threads
        self._threads: OrderedDict[str, dict[str, Decision]] = OrderedDict()

    def for_thread(self, thread_id: str) -> dict[str, Decision]:
        decisions = self._threads.pop(thread_id, None) or {}
        self._threads[thread_id] = decisions
        while len(self._threads) > self.max_threads:
            self._threads.popitem(last=False)
        return decisions


class _Pending:
    def __init__(self) -> None:
        self.answered = anyio.Event()
        self.decision: Decision | None = None


class HubPermissionGate:
    def __init__(
        self,
        hub: Hub,
        run: Run,
        tools: DemoTools,
        mode: ApprovalMode,
        timeout_s: float,
        remembered: dict[str, Decision],
    ) -> None:
        self.hub = hub
        self.run = run
        self.tools = tools
        self.mode = mode
        self.timeout_s = timeout_s
        self.remembered = remembered
        self.pending: dict[str, _Pending] = {}
        self._count = 0

    def needs_approval(self, call: ToolCall) -> bool:
        if self.mode == "never":
            return False
        return self.mode == "always" or self.tools.needs_approval(call)

    async def decide(self, call: ToolCall) -> PermissionDecision:
        self._count += 1
        request_id = f"perm_{self._count}"
        decision = self.remembered.get(call.name)
        by = "remembered"
        if decision is None:
            pending = self.pending[request_id] = _Pending()
            self.hub.publish(
                self.run,
                PERMISSION_REQUEST,
                {
                    "requestId": request_id,
                    "toolCall": {
                        "id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                        "kind": self.tools.kind(call.name),
                    },
                    "options": list(DECISIONS[:4]),
                },
            )
            try:
                with anyio.move_on_after(self.timeout_s):
                    await pending.answered.wait()
            finally:
                del self.pending[request_id]
            decision, by = (
                (pending.decision, "client")
                if pending.decision
                else (
                    "reject_once",
                    "timeout",
                )
            )
            if decision in ("allow_always", "reject_always"):
                self.remembered[call.name] = decision
        self.hub.publish(
            self.run,
            PERMISSION_RESULT,
            {"requestId": request_id, "toolCallId": call.id, "decision": decision, "by": by},
        )
        return "allow" if decision.startswith("allow") else "reject"

    def answer(self, request_id: str, decision: str) -> str | None:
        """Record a client's answer; a string is the reason it was not taken."""
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}; got {decision!r}")
        pending = self.pending.get(request_id)
        if pending is None or pending.answered.is_set():
            return f"no pending permission request {request_id!r} in this run"
        pending.decision = decision  # type: ignore[assignment]
        pending.answered.set()
        return None
