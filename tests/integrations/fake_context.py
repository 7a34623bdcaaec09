"""A run context for driving a loop without a gateway, and the checks every event stream passes.

    ctx = FakeRunContext("What is 2 + 3?", decisions=["allow_once"])
    events = await collect(loop, ctx)          # validated, ends with one terminal completion

The test plays the gateway's part: ``ctx.cancel()``, ``ctx.steer(text)``, and the answers to
permission questions (``decisions``, in order; ``reject_once`` once they run out, as when nobody
answers in time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from loopgate.contracts import LoopEvent, is_terminal_completion, validate_event
from loopgate.contracts.loop import Approval, LoopRequest
from loopgate.gateway.plugs.context import GatewayRunContext

Loop = Callable[[Any], AsyncIterable[Any]]
OnEvent = Callable[[LoopEvent], Awaitable[None] | None]


class FakeRunContext(GatewayRunContext):
    """The gateway's own run context (:class:`contracts.loop.RunContext`), with the test in the
    gateway's place: it cancels, steers, and answers permission questions from ``decisions``."""

    def __init__(
        self,
        input: str = "",
        *,
        input_parts: Sequence[Mapping[str, Any]] = (),
        messages: Sequence[Mapping[str, Any]] = (),
        tools: Sequence[Mapping[str, Any]] = (),
        config: Mapping[str, Any] | None = None,
        approval: Approval = "auto",
        decisions: Iterable[str] = (),
        run_id: str = "run_1",
        thread_id: str = "thread_1",
    ) -> None:
        # Through LoopRequest, so a test cannot hand a loop a thread the gateway would refuse.
        request = msgspec.convert(
            {
                "run_id": run_id,
                "thread_id": thread_id,
                "input": input,
                "input_parts": list(input_parts),
                "messages": list(messages),
                "tools": list(tools),
                "config": dict(config or {}),
                "approval": approval,
            },
            LoopRequest,
        )
        super().__init__(request, self._answer, lambda: None)
        self._decisions = deque(decisions)
        self.permission_requests: list[dict[str, Any]] = []

    async def _answer(
        self, tool_call: Mapping[str, Any], options: Sequence[str] | None, request_id: str | None
    ) -> str:
        self.permission_requests.append(dict(tool_call))
        return self._decisions.popleft() if self._decisions else "reject_once"

    def steer(self, content: str) -> None:
        assert self.queue_steer(content) is None


async def collect(
    loop: Loop, ctx: FakeRunContext, on_event: OnEvent | None = None
) -> list[LoopEvent]:
    """Every event of one run, each validated as the gateway validates a plugged loop's events;
    ``on_event`` sees each one as it arrives (to cancel or steer at a given point)."""
    events: list[LoopEvent] = []
    async for item in loop(ctx):
        event = as_event(item)
        events.append(event)
        if on_event is not None:
            done = on_event(event)
            if done is not None:
                await done
    check_stream(events)
    return events


def as_event(item: Any) -> LoopEvent:
    """A loop's event (a ``LoopEvent`` or a ``{"kind", "data"}`` dict), validated."""
    if isinstance(item, LoopEvent):
        return validate_event(item.kind, item.data)
    assert isinstance(item, dict) and set(item) <= {"kind", "data"}, item
    return validate_event(item["kind"], item.get("data", {}))


def check_stream(events: Sequence[LoopEvent]) -> dict[str, Any]:
    """The stream ends with its only terminal completion; returns that completion's data."""
    terminal = [i for i, e in enumerate(events) if is_terminal_completion(e.kind, e.data)]
    assert terminal == [len(events) - 1], [(e.kind, e.data.get("status")) for e in events]
    return events[-1].data


def kinds(events: Sequence[LoopEvent]) -> list[str]:
    return [e.kind for e in events]


def of_kind(events: Sequence[LoopEvent], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == kind]


def text(events: Sequence[LoopEvent], kind: str = "content_delta") -> str:
    return "".join(e.data["delta"] for e in events if e.kind == kind)
