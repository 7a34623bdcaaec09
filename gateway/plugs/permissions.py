"""Tool approval through the hub: a loop asks, any subscribed client answers.

Every loop asks the same way (:meth:`contracts.loop.RunContext.ask_permission`): the broker
publishes ``permission_request``, waits for an answer from any client (or the timeout) and
publishes ``permission_result``. Adapters turn the request into their protocol's own question.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ...contracts.client_errors import ClientError
from ...contracts.gateway_events import (
    DECISIONS,
    PERMISSION_REQUEST,
    PERMISSION_RESULT,
    Decision,
)

if TYPE_CHECKING:
    from ..hub import Hub, Run

ASKABLE: tuple[Decision, ...] = DECISIONS[:4]
# A loop may name its own request ids; they end up in AG-UI interrupt ids and log lines.
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


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


class PermissionBroker:
    """The permission questions of one run."""

    def __init__(
        self, hub: Hub, run: Run, timeout_s: float, remembered: dict[str, Decision]
    ) -> None:
        self.hub = hub
        self.run = run
        self.timeout_s = timeout_s
        self.remembered = remembered
        self.pending: dict[str, _Pending] = {}
        self._count = 0

    async def ask(
        self,
        tool_call: Mapping[str, Any],
        options: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> Decision:
        """The decision for ``tool_call``; ``ValueError`` if the question itself is malformed."""
        call = _tool_call(tool_call)
        offered = _options(options)
        self._count += 1
        if not (isinstance(request_id, str) and _REQUEST_ID.fullmatch(request_id)) or (
            request_id in self.pending
        ):
            request_id = f"perm_{self._count}"
        decision = self.remembered.get(call["name"])
        by = "remembered"
        if decision is None:
            pending = self.pending[request_id] = _Pending()
            self.hub.publish(
                self.run,
                PERMISSION_REQUEST,
                {"requestId": request_id, "toolCall": call, "options": offered},
            )
            # Listings say the run waits for an answer (RunInfo.awaiting), not that it runs.
            self.run.asking += 1
            try:
                with anyio.move_on_after(self.timeout_s):
                    await pending.answered.wait()
            finally:
                self.run.asking -= 1
                del self.pending[request_id]
            if pending.decision:
                decision, by = pending.decision, "client"
            else:
                decision, by = "reject_once", "timeout"
            if decision in ("allow_always", "reject_always"):
                self.remembered[call["name"]] = decision
        self.hub.publish(
            self.run,
            PERMISSION_RESULT,
            {"requestId": request_id, "toolCallId": call["id"], "decision": decision, "by": by},
        )
        return decision

    def answer(self, request_id: str, decision: str) -> str | None:
        """Record a client's answer; a string is the reason it was not taken."""
        if decision not in DECISIONS:
            raise ClientError(f"decision must be one of {', '.join(DECISIONS)}; got {decision!r}")
        pending = self.pending.get(request_id)
        if pending is None or pending.answered.is_set():
            return f"no pending permission request {request_id!r} in this run"
        pending.decision = decision
        pending.answered.set()
        return None


def _tool_call(raw: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ClientError("a permission request needs a toolCall object")
    call_id, name = raw.get("id"), raw.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise ClientError("a permission request's toolCall needs a string id and name")
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, dict):
        raise ClientError("a permission request's toolCall.arguments must be an object")
    kind = raw.get("kind")
    return {
        "id": call_id,
        "name": name,
        "arguments": arguments,
        "kind": kind if isinstance(kind, str) and kind else "other",
    }


def _options(options: Sequence[str] | None) -> list[Decision]:
    if options is None:
        return list(ASKABLE)
    # In the client's order.
    offered: list[Decision] = [known for o in options for known in ASKABLE if o == known]
    if not offered or not any(o.startswith("allow") for o in offered):
        raise ClientError(f"permission options must include an allow decision from {ASKABLE}")
    return offered
