"""A round without tool calls: the final answer, as ``before_completion`` lets it stand.

A reply with no answer at all ends the turn as ``completion{failed, reason: "empty_response"}``;
a wrap-up reply that is only a tool call (wrap-up offers no tools, so it is not run) as
``completion{failed, reason: "wrap_up_without_answer"}``: never an empty ``completed``.
"""

from __future__ import annotations

from ...contracts.messages import Message
from .hook_runner import HookRunner
from .hooks import MAX_COMPLETION_RETRIES, Accept, Narrate, Retry
from .state import TurnState
from .streaming import Response
from .structured import REPAIR, SCHEMA_MISMATCH, answer_problem

NARRATE_CHUNK = 24
# The completion reason of a turn whose final reply has no answer (seed 000's degenerate reply).
EMPTY_RESPONSE = "empty_response"
WRAP_UP_WITHOUT_ANSWER = "wrap_up_without_answer"


async def final_answer(turn: TurnState, hooks: HookRunner, resp: Response) -> bool:
    """Complete the turn with ``resp``, unless steering or a hook asks for another round.

    True = the turn is over.
    """
    text = resp.text
    assistant = Message(role="assistant", content=text, reasoning=resp.reasoning or None)
    if turn.control.pending_steers:
        # The user steered while the model was answering (or the steer cut the answer short):
        # answer the steering, too.
        if text or resp.reasoning:
            turn.history.append(assistant)
        return False
    if turn.cfg.response_format is not None and await _off_format(turn, resp, assistant):
        return turn.done
    # Every hook is asked; retry > narrate > accept (hooks.COMPOSITION).
    actions = await hooks.call("before_completion", text)
    retry = next((a for a in actions if isinstance(a, Retry)), None)
    if retry is not None and turn.completion_retries < MAX_COMPLETION_RETRIES:
        turn.completion_retries += 1
        await hooks.announce("before_completion", retry, "nudge", value=retry.message)
        turn.history.append(assistant)
        turn.history.append(Message(role="user", content=retry.message))
        return False
    if retry is not None:
        # The redo cap: past it the answer stands, and the hook_action says why.
        capped = f"retry limit reached ({MAX_COMPLETION_RETRIES} per turn)"
        await hooks.announce("before_completion", Accept(), capped)
    narrations = [a for a in actions if isinstance(a, Narrate)]
    for narrate in narrations:
        await hooks.announce("before_completion", narrate, "narrate", value=narrate.text)
        for i in range(0, len(narrate.text), NARRATE_CHUNK):
            await turn.emit("content_delta", {"delta": narrate.text[i : i + NARRATE_CHUNK]})
        text += narrate.text
        turn.text_length += len(narrate.text)
        assistant.content = text
    if not narrations:
        for action in actions:
            if isinstance(action, Accept):
                await hooks.announce("before_completion", action)
    if not text.strip():
        await _empty_answer(turn, resp, assistant)
        return True
    turn.history.append(assistant)
    await turn.finish("completed", turn.finish_reason or "stop")
    return True


async def _empty_answer(turn: TurnState, resp: Response, assistant: Message) -> None:
    """A reply with no answer and no tool call (nothing, whitespace, only thinking) is a
    failure the client can read, not a completion with nothing in it."""
    if resp.reasoning:
        turn.history.append(assistant)  # the reasoning streamed: keep it with the thread
        what = "only reasoning"
    else:
        what = "nothing" if not resp.text else "only whitespace"
    message = f"the model's reply had no answer and no tool call ({what})"
    reason = EMPTY_RESPONSE
    if resp.calls:
        # Wrap-up offers no tools; the model called one anyway instead of answering.
        names = ", ".join(dict.fromkeys(p.call.name for p in resp.calls))[:200]
        message = (
            f"the model's wrap-up reply was only a tool call ({names}), not run: wrap-up "
            "offers no tools, and the model gave no answer"
        )
        reason = WRAP_UP_WITHOUT_ANSWER
    if turn.finish_reason == "length":
        message += "; it was cut off at the token limit"
    await turn.emit("error", {"message": message, "round": turn.round, "phase": "llm_response"})
    await turn.finish("failed", reason)


async def _off_format(turn: TurnState, resp: Response, assistant: Message) -> bool:
    """Structured output: an answer not in the run's ``response_format`` gets one repair round,
    then fails the turn. True = the answer is not accepted (``turn.done``: the turn is over)."""
    response_format = turn.cfg.response_format
    if response_format is None or not resp.text.strip():
        return False  # no answer at all: an empty reply, said as such
    problem = answer_problem(response_format, resp.text)
    if problem is None:
        return False
    turn.history.append(assistant)
    if not turn.schema_repaired:
        turn.schema_repaired = True
        turn.history.append(Message(role="user", content=REPAIR.format(problem=problem)))
        await turn.emit(
            "hook_action",
            {
                "hook": "structured_output",
                "action": "retry",
                "reason": f"{SCHEMA_MISMATCH}: {problem}",
                "round": turn.round,
            },
        )
        return True
    message = f"the model's answer is not in the requested format: {problem}"
    await turn.emit("error", {"message": message, "round": turn.round, "phase": "llm_response"})
    await turn.finish("failed", SCHEMA_MISMATCH)
    return True
