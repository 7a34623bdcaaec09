"""The round boundary: steering, the turn's limits, soft timeout and wrap-up, ``pre_step``."""

from __future__ import annotations

from typing import Any

import anyio

from ...contracts.messages import Message, ToolSpec
from .hook_runner import HookRunner
from .hooks import Reject
from .pre_step import apply_pre_step
from .state import TurnState

WRAP_UP_NUDGE = (
    "Time is almost up. Wrap up now: give your best final answer with what you already know"
    " ({rounds} more tool round(s) at most)."
)
WRAP_UP_NUDGE_NO_TOOLS = (
    "Time is almost up. Wrap up now: give your best final answer with what you already know"
    " (no more tool calls)."
)


async def open_round(turn: TurnState, hooks: HookRunner) -> bool:
    """Round-boundary work, ending in ``stage_start``. True = the turn is over."""
    if turn.control.cancelled:
        # A cancel that raced ahead of any checkpoint; the caller sees completion{cancelled}.
        return True
    # A rewrite and a tool_choice last one step (its request and that request's retries).
    turn.rewrite = None
    turn.tool_choice = None
    for text in turn.control.take_steers():
        turn.history.append(Message(role="user", content=text))
        await turn.emit("steer", {"content": text, "round": turn.round})
    exhausted = _exhausted(turn)
    if exhausted is not None:
        data, reason = exhausted
        await turn.emit("budget_exhausted", data)
        await turn.finish("budget_exhausted", reason)
        return True
    soft_timeout_ms = turn.cfg.soft_timeout_ms
    if soft_timeout_ms is not None and not turn.wrap_up:
        elapsed = turn.elapsed_ms()
        if elapsed >= soft_timeout_ms:
            await _start_wrap_up(turn, elapsed)
    for fn in hooks.each("pre_step"):
        # In order: each hook sees what the ones before it did; the first reject wins.
        for action in await hooks.ask(fn, "pre_step"):
            if isinstance(action, Reject):
                await hooks.announce("pre_step", action)
                await turn.finish("failed", f"rejected by pre_step: {action.reason}".rstrip(": "))
                return True
            await apply_pre_step(turn, hooks, action)
    await turn.emit("stage_start", {"model": turn.loop.provider.model, "round": turn.round})
    return False


def _exhausted(turn: TurnState) -> tuple[dict[str, Any], str] | None:
    """The token budget or ``max_rounds`` reached: the ``budget_exhausted`` payload and reason.

    Past ``max_rounds``, the turn's round is set back to the last one it ran.
    """
    cfg = turn.cfg
    used = turn.prompt_tokens + turn.completion_tokens
    if cfg.budget is not None and used >= cfg.budget:
        return {"kind": "tokens", "used": used, "budget": cfg.budget}, "token budget exhausted"
    if turn.round > cfg.max_rounds:
        turn.round = cfg.max_rounds
        return {"kind": "rounds", "rounds": cfg.max_rounds}, "max_rounds reached"
    return None


async def _start_wrap_up(turn: TurnState, elapsed: float) -> None:
    """The soft timeout passed: announce it, nudge the model, arm the hard cap if any."""
    cfg = turn.cfg
    turn.wrap_up = True
    await turn.emit(
        "soft_timeout",
        {"round": turn.round, "elapsedMs": elapsed, "softTimeoutMs": cfg.soft_timeout_ms},
    )
    if cfg.wrap_up_keeps_tools:
        nudge = WRAP_UP_NUDGE.format(rounds=cfg.wrap_up_max_tool_rounds)
    else:
        nudge = WRAP_UP_NUDGE_NO_TOOLS
    turn.history.append(Message(role="system", content=nudge))
    if cfg.wrap_up_hard_cap_ms is not None:
        # The turn's own scope gets a deadline; hitting it ends the turn as budget_exhausted.
        turn.scope.deadline = anyio.current_time() + cfg.wrap_up_hard_cap_ms / 1000


def offered_tools(turn: TurnState) -> list[ToolSpec]:
    """The tools this round offers: in wrap-up, none (or, with ``wrap_up_keeps_tools``, none
    once wrap-up has used its ``wrap_up_max_tool_rounds``)."""
    if turn.wrap_up and (
        not turn.cfg.wrap_up_keeps_tools
        or turn.wrap_up_tool_rounds >= turn.cfg.wrap_up_max_tool_rounds
    ):
        return []
    return turn.loop.tool_specs()
