"""Running a round's tool calls: in call order, consecutive concurrency-safe calls together.

:func:`invoke` is the one place the tool executor is called; a hung call becomes a failed
result after ``tool_timeout_ms`` (in wrap-up, ``wrap_up_tool_timeout_ms`` if shorter), and an
executor's exception is never shown to clients.
"""

from __future__ import annotations

import time

import anyio

from ...contracts.messages import ToolCall
from .state import TurnState
from .types import ToolExecutor, ToolResult


class Slot:
    """One tool call of a round: its outcome, filled in when it is ready to be emitted."""

    __slots__ = ("alias", "call", "deduped", "duration_ms", "key", "raised", "ready", "result")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.result: ToolResult | None = None
        self.raised = False
        self.deduped = False
        self.duration_ms = 0.0
        self.key = ""
        self.alias: Slot | None = None
        self.ready = anyio.Event()

    def done(self, result: ToolResult) -> None:
        self.result = result
        self.ready.set()


async def execute_all(turn: TurnState, slots: list[Slot]) -> None:
    """Run calls sequentially, letting consecutive concurrency-safe calls overlap."""
    batch: list[Slot] = []
    parallel = turn.cfg.parallel_tools
    executor = turn.loop.executor
    for slot in slots:
        if parallel and _safe(executor, slot.call):
            batch.append(slot)
            continue
        await _execute_batch(turn, batch)
        batch = []
        await _execute(turn, slot)
    await _execute_batch(turn, batch)


def _safe(executor: ToolExecutor, call: ToolCall) -> bool:
    check = getattr(executor, "concurrency_safe", None)
    if check is None:
        return False
    try:
        return bool(check(call))
    except Exception:
        return False


async def _execute_batch(turn: TurnState, batch: list[Slot]) -> None:
    if len(batch) == 1:
        await _execute(turn, batch[0])
    elif batch:
        async with anyio.create_task_group() as tg:
            for slot in batch:
                tg.start_soon(_execute, turn, slot)


async def _execute(turn: TurnState, slot: Slot) -> None:
    """Run one call, time it, remember its result for deduplication, and mark it ready."""
    t0 = time.perf_counter()
    result = await invoke(turn, slot)
    slot.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
    if slot.key and not result.suspend:
        turn.dedup[slot.key] = result
    slot.done(result)


async def invoke(turn: TurnState, slot: Slot) -> ToolResult:
    """Call the executor for ``slot``'s call under the tool timeout: its one call site."""
    call = slot.call
    timeout_ms = turn.cfg.tool_timeout_ms
    wrap_up_ms = turn.cfg.wrap_up_tool_timeout_ms
    if turn.wrap_up and wrap_up_ms is not None:
        timeout_ms = min(timeout_ms, wrap_up_ms)
    try:
        with anyio.move_on_after(timeout_ms / 1000), turn.loop.scope(f"tool.{call.id}"):
            result = await turn.loop.executor.execute(call, turn.ctx())
            if isinstance(result, ToolResult):
                return result
            slot.raised = True
            return ToolResult(success=False, error=f"{call.name} returned an invalid result")
        return ToolResult(success=False, error=f"timed out after {timeout_ms} ms")
    except anyio.get_cancelled_exc_class():
        raise
    except Exception:
        # Exception text from inside a tool may leak internals; the client gets a summary.
        slot.raised = True
        return ToolResult(success=False, error=f"{call.name} failed with an internal error")
