"""A round without tool calls: the final answer, as ``before_completion`` lets it stand."""

from __future__ import annotations

from loopgate.contracts.messages import Message
from loopgate.gateway.loop.hook_runner import HookRunner
from loopgate.gateway.loop.hooks import Narrate, Retry
from loopgate.gateway.loop.state import TurnState
from loopgate.gateway.loop.streaming import Response

NARRATE_CHUNK = 24


async def final_answer(turn: TurnState, hooks: HookRunner, resp: Response) -> bool:
    """Complete the turn with ``resp``, unless steering or a hook asks for another round.

    True = the turn is over.
    """
    text = resp.text
    assistant = Message(role="assistant", content=text, reasoning=resp.reasoning or None)
    if turn.control.pending_steers:
        # The user steered while the model was answering: answer the steering, too.
        turn.history.append(assistant)
        return False
    action = await hooks.call("before_completion", text)
    if isinstance(action, Retry):
        await hooks.announce("before_completion", action, "nudge", value=action.message)
        turn.history.append(assistant)
        turn.history.append(Message(role="user", content=action.message))
        return False
    if isinstance(action, Narrate):
        await hooks.announce("before_completion", action, "narrate", value=action.text)
        for i in range(0, len(action.text), NARRATE_CHUNK):
            await turn.emit("content_delta", {"delta": action.text[i : i + NARRATE_CHUNK]})
        text += action.text
        turn.text_length += len(action.text)
        assistant.content = text
    elif action is not None:
        await hooks.announce("before_completion", action)
    turn.history.append(assistant)
    await turn.finish("completed", turn.finish_reason or "stop")
    return True
