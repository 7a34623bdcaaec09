"""A tool round: the calls announced, the server's run, and whether the turn goes on.

Client tools (offered by the client, not run by the loop) end the turn as ``waiting_user``
with their ids; so does a suspension. Too many consecutive tool errors or a
``tool_made_progress`` stop end it as ``failed``; otherwise ``completion{executing}``.
"""

from __future__ import annotations

from typing import Any

from ...contracts.messages import Message
from .hook_runner import HookRunner
from .hooks import Proceed, RoundSummary, Stop
from .state import TurnState
from .streaming import ParsedCall, Response
from .stuck import Pattern
from .tool_calls import RoundOutcome, run_calls


async def run_tool_round(turn: TurnState, hooks: HookRunner, resp: Response) -> bool:
    """Run one round of tool calls. True = the turn is over."""
    parsed = resp.calls
    turn.history.append(
        Message(
            role="assistant",
            content=resp.text,
            reasoning=resp.reasoning or None,
            tool_calls=[p.call for p in parsed],
        )
    )
    await _announce(turn, parsed)
    pending = [p.call.id for p in parsed if p.error is None and p.call.name in turn.client_names]
    server = [p for p in parsed if p.call.id not in pending]
    outcome = await run_calls(turn, hooks, server)
    await turn.emit(
        "stage_complete",
        {
            "round": turn.round,
            "toolCallCount": len(parsed),
            "consecutiveToolErrors": turn.consecutive_errors,
            "elapsedMs": turn.elapsed_ms(),
            "promptTokens": turn.prompt_tokens,
            "completionTokens": turn.completion_tokens,
        },
    )
    end = _turn_end(turn, outcome, pending)
    if end is not None:
        status, reason, extra = end
        await turn.finish(status, reason, **extra)
        return True
    stuck = await _stuck(turn, resp)
    stopped, proceeded = await _stopped(turn, hooks, resp, outcome, stuck)
    if stopped:
        return True
    if stuck is not None and not proceeded:
        pattern, rounds = stuck
        await turn.emit(
            "budget_exhausted", {"kind": "repetition", "pattern": pattern, "rounds": rounds}
        )
        await turn.finish("budget_exhausted", f"repetition: {pattern} over {rounds} rounds")
        return True
    if turn.wrap_up:
        turn.wrap_up_tool_rounds += 1
    await turn.finish_round()
    return False


async def _announce(turn: TurnState, parsed: list[ParsedCall]) -> None:
    """A ``tool_call_start`` per call, in call order; each stays open until its result."""
    for p in parsed:
        turn.open_calls[p.call.id] = p.call
        data: dict[str, Any] = {
            "id": p.call.id,
            "name": p.call.name,
            "round": turn.round,
            "arguments": p.call.arguments,
        }
        if p.error is not None:
            data["rawArguments"] = p.raw
        await turn.emit("tool_call_start", data)
    turn.tool_names.extend(p.call.name for p in parsed)


def _turn_end(
    turn: TurnState, outcome: RoundOutcome, pending: list[str]
) -> tuple[str, str, dict[str, Any]] | None:
    """Client tools to run, a suspension, or too many tool errors end the turn: how."""
    if pending:
        return "waiting_user", "client_tool", {"pendingToolCallIds": pending}
    if outcome.suspend is not None:
        call_id, reason = outcome.suspend
        return "waiting_user", reason, {"toolCallId": call_id}
    max_errors = turn.cfg.max_tool_errors
    if turn.consecutive_errors >= max_errors:
        reason = (
            f"too many consecutive tool errors ({turn.consecutive_errors}; "
            f"max_tool_errors={max_errors})"
        )
        return "failed", reason, {}
    return None


async def _stuck(turn: TurnState, resp: Response) -> tuple[Pattern, int] | None:
    """The round's calls against the turn's: stuck for the first time, the model is told (a
    system note after the results); stuck again, the pattern, for the turn to stop."""
    found = turn.stuck.observe(resp.calls)
    if found is None:
        return None
    if turn.stuck.told:
        return found
    turn.stuck.told = True
    note = turn.stuck.note(*found)
    turn.history.append(Message(role="system", content=note))
    pattern, rounds = found
    await turn.emit(
        "hook_action",
        {
            "hook": "stuck_detection",
            "action": "append",
            "reason": f"{pattern} over {rounds} rounds",
            "round": turn.round,
            "value": [{"role": "system", "content": note[:300]}],
        },
    )
    return None


async def _stopped(
    turn: TurnState,
    hooks: HookRunner,
    resp: Response,
    outcome: RoundOutcome,
    stuck: tuple[Pattern, int] | None,
) -> tuple[bool, bool]:
    """``tool_made_progress`` on the round's summary: (it stopped the turn, a hook answered
    ``Proceed``)."""
    summary = RoundSummary(
        round=turn.round,
        tool_names=[p.call.name for p in resp.calls],
        tool_call_count=len(resp.calls),
        failed_count=outcome.failed,
        deduplicated_count=outcome.deduped,
        consecutive_tool_errors=turn.consecutive_errors,
        text_length=len(resp.text),
        stuck=None if stuck is None else stuck[0],
    )
    proceeded = False
    for fn in hooks.each("tool_made_progress"):
        # In order; the first stop wins and the hooks after it are not asked.
        for action in await hooks.ask(fn, "tool_made_progress", summary):
            await hooks.announce("tool_made_progress", action)
            if isinstance(action, Stop):
                await turn.finish("failed", f"stopped: {action.reason}".rstrip(": "))
                return True, proceeded
            proceeded = proceeded or isinstance(action, Proceed)
    return False, proceeded
