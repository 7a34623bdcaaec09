"""A round's server-side tool calls: resolved, run, and reported in call order.

Resolution settles the calls that will not run (bad arguments, an unknown tool, a duplicate,
refused by the user); the rest run in the background
(:mod:`loopgate.gateway.reference.tool_exec`) while results are reported one by one, in the
order the model made the calls, each after ``post_tool_result`` has seen it (and perhaps
replaced it). A result enters the model's context bounded by ``max_tool_result_chars``
(:func:`bounded`). With ``steer_mode: "interrupt"`` a steer stops the round: the calls not yet
reported get an "interrupted" result.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from ...contracts.messages import Message
from .hook_runner import HookError, HookRunner
from .hooks import Replace, Suspend
from .state import TurnState
from .streaming import ParsedCall
from .tool_exec import Slot, execute_all
from .truncation import bounded, preview
from .types import ToolResult

INTERRUPTED = "interrupted: the user sent a new message before this tool call finished"

_canonical = msgspec.json.Encoder(order="sorted")


class RoundOutcome:
    """What the round's results add up to: failures, duplicates, and the first suspension."""

    __slots__ = ("deduped", "failed", "interrupted", "suspend")

    def __init__(self) -> None:
        self.failed = 0
        self.deduped = 0
        self.interrupted = False
        self.suspend: tuple[str, str] | None = None  # (tool call id, reason)


async def run_calls(turn: TurnState, hooks: HookRunner, parsed: list[ParsedCall]) -> RoundOutcome:
    """Resolve, run and report ``parsed`` in call order."""
    slots = [Slot(p.call) for p in parsed]
    outcome = RoundOutcome()
    problem: BaseException | None = None
    with turn.control.interruptible() as phase:
        to_run = await _resolve(turn, parsed, slots)
        async with anyio.create_task_group() as tg:
            tg.start_soon(execute_all, turn, to_run)
            try:
                for slot in slots:
                    await _settle(turn, hooks, slot, outcome)
            except Exception as exc:
                # Hook or sink failure: stop the tools, re-raise outside the task group so the
                # caller sees the exception itself rather than an ExceptionGroup.
                problem = exc
                tg.cancel_scope.cancel()
    if problem is not None:
        raise problem
    if turn.control.take_interrupt() and phase.cancelled_caught:
        outcome.interrupted = True
        for slot in slots:
            if slot.call.id in turn.open_calls:
                # A result that arrived is reported as it is; the rest were cut short, which
                # is not the model's tool error (the user stopped the round) and not counted.
                result = slot.result or ToolResult(success=False, error=INTERRUPTED)
                await report(turn, slot, result, counted=slot.result is not None)
    return outcome


async def _resolve(turn: TurnState, parsed: list[ParsedCall], slots: list[Slot]) -> list[Slot]:
    """Settle the calls that will not run; returns the slots to run."""
    to_run: list[Slot] = []
    seen: dict[str, Slot] = {}
    gate = turn.loop.permissions
    for p, slot in zip(parsed, slots, strict=True):
        call = p.call
        if p.error is not None:
            slot.done(ToolResult(success=False, error=p.error))
            continue
        if call.name not in turn.server_names:
            slot.done(ToolResult(success=False, error=f"unknown tool {call.name!r}"))
            continue
        if turn.cfg.tool_dedup and _deduplicated(turn, slot, seen):
            continue
        if gate is not None and gate.needs_approval(call) and await gate.decide(call) != "allow":
            slot.done(ToolResult(success=False, error="rejected by the user"))
            continue
        to_run.append(slot)
    return to_run


def _deduplicated(turn: TurnState, slot: Slot, seen: dict[str, Slot]) -> bool:
    """True = ``slot`` repeats a call of this turn (its result reused) or of this round."""
    call = slot.call
    slot.key = call.name + "\x00" + _canonical.encode(call.arguments).decode()
    earlier = turn.dedup.get(slot.key)
    if earlier is not None:
        slot.deduped = True
        slot.done(earlier)
        return True
    twin = seen.get(slot.key)
    if twin is not None:
        slot.deduped = True
        slot.alias = twin
        return True
    seen[slot.key] = slot
    return False


async def _settle(turn: TurnState, hooks: HookRunner, slot: Slot, outcome: RoundOutcome) -> None:
    """Wait for ``slot``'s result, run ``post_tool_result`` on it, report it, count it."""
    if slot.alias is not None:
        await slot.alias.ready.wait()
        assert slot.alias.result is not None
        slot.done(slot.alias.result)
    await slot.ready.wait()
    result = slot.result
    assert result is not None
    replaced = False
    suspend: str | None = None
    for fn in hooks.each("post_tool_result"):
        # In order, each hook seeing the result as the ones before it left it.
        for action in await hooks.ask(fn, "post_tool_result", slot.call, result):
            extra: dict[str, Any] = {"toolCallId": slot.call.id}
            if isinstance(action, Replace):
                result = _checked_replacement(action.result)
                replaced = True
                extra["value"] = preview(result.content or result.error or "")
            elif isinstance(action, Suspend) and suspend is None:
                suspend = action.reason or "suspended by hook"
            await hooks.announce("post_tool_result", action, **extra)
    if replaced:
        slot.raised = False  # the hook's result is what is reported, not the executor's failure
    await report(turn, slot, result, replaced=replaced)
    outcome.failed += not result.success
    outcome.deduped += slot.deduped
    if outcome.suspend is None:
        if result.suspend:
            outcome.suspend = (slot.call.id, _suspend_reason(result))
        elif suspend is not None:
            outcome.suspend = (slot.call.id, suspend)


def _checked_replacement(result: Any) -> ToolResult:
    if not isinstance(result, ToolResult) or not isinstance(result.content, str):
        raise HookError("post_tool_result", "returned replace without a ToolResult")
    return result


async def report(
    turn: TurnState,
    slot: Slot,
    result: ToolResult,
    *,
    counted: bool = True,
    replaced: bool = False,
) -> None:
    """Count a result, emit ``tool_call_result`` (or ``tool_error``), add the observation."""
    call = slot.call
    if counted and result.success:
        turn.consecutive_errors = 0
    elif counted:
        turn.consecutive_errors += 1
        turn.tool_error_count += 1
    observation, omitted = bounded(_observation(result), turn.cfg.max_tool_result_chars)
    if slot.raised:
        await turn.emit(
            "tool_error", {"id": call.id, "name": call.name, "error": result.error or ""}
        )
    else:
        data = _result_data(turn, slot, result)
        if replaced:
            data["replaced"] = True
        if omitted:
            # The model saw only part of it; consumers that know the fields can say so.
            data["truncated"] = True
            data["omittedChars"] = omitted
        await turn.emit("tool_call_result", data)
    turn.open_calls.pop(call.id, None)
    turn.history.append(
        Message(role="tool", tool_call_id=call.id, name=call.name, content=observation)
    )


def _result_data(turn: TurnState, slot: Slot, result: ToolResult) -> dict[str, Any]:
    call = slot.call
    data: dict[str, Any] = {
        "id": call.id,
        "name": call.name,
        "success": result.success,
        "durationMs": 0.0 if slot.deduped else slot.duration_ms,
        "resultPreview": preview(result.content or result.error or ""),
    }
    if result.error is not None:
        data["error"] = result.error
    if turn.cfg.persist_tool_results:
        data["result"] = result.data if result.data is not None else result.content
    if slot.deduped:
        data["deduplicated"] = True
    return data


def _observation(result: ToolResult) -> str:
    if result.success:
        return result.content
    error = f"Error: {result.error or 'the tool failed'}"
    return f"{error}\n{result.content}" if result.content else error


def _suspend_reason(result: ToolResult) -> str:
    reason = result.data.get("reason") if isinstance(result.data, dict) else None
    return reason if isinstance(reason, str) else "tool_suspended"
