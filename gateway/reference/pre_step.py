"""Applying a ``pre_step`` action: what the model is sent this step, and from now on.

Seed 001: hooks "must not rewrite prior history" and "previous entries are not rewritten". So
``Append`` only adds to the history, and ``Rewrite`` / ``Compact`` never touch it: they set a
view (:meth:`TurnState.request_messages`) that the model request is built from — for one step
(rewrite) or for the rest of the turn (compact) — while the history the turn returns, and the
thread stores, keeps every message.
"""

from __future__ import annotations

from typing import Any

from ...contracts.messages import Message
from ...contracts.parts import text_of
from .hook_runner import HookError, HookRunner
from .hooks import (
    TOOL_CHOICE_MODES,
    Action,
    Append,
    Compact,
    Rewrite,
    ToolChoice,
)
from .state import TurnState
from .truncation import preview

_ROLES = ("system", "user", "assistant", "tool")


async def apply_pre_step(turn: TurnState, hooks: HookRunner, action: Action) -> None:
    """Apply one ``pre_step`` action other than ``reject``, and announce it."""
    if isinstance(action, Append):
        messages = _checked(action.messages, "append", appended=True)
        turn.history.extend(messages)
        await hooks.announce("pre_step", action, value=[_summary(m) for m in messages])
    elif isinstance(action, Rewrite):
        messages = _checked(action.messages, "rewrite")
        turn.rewrite = (messages, len(turn.history))
        await hooks.announce("pre_step", action, value={"messages": len(messages)})
    elif isinstance(action, Compact):
        messages = _checked(action.messages, "compact")
        replaced = len(turn.request_messages())
        turn.compaction = (messages, len(turn.history))
        turn.rewrite = None  # the compacted view is what this step sends, too
        await hooks.announce(
            "pre_step", action, value={"messages": len(messages), "replaced": replaced}
        )
    elif isinstance(action, ToolChoice):
        turn.tool_choice = _checked_choice(turn, action.choice)
        await hooks.announce("pre_step", action, value=turn.tool_choice)
    else:  # proceed
        await hooks.announce("pre_step", action)


def _checked(messages: Any, what: str, *, appended: bool = False) -> list[Message]:
    """``messages`` as a list of well-formed messages, or the hook's error."""
    if not isinstance(messages, list) or not messages:
        raise HookError("pre_step", f"returned {what} without messages")
    called: set[str] = set()
    for message in messages:
        if not isinstance(message, Message) or message.role not in _ROLES:
            raise HookError("pre_step", f"returned {what} with something that is not a message")
        if not isinstance(message.content, str):
            raise HookError("pre_step", f"returned {what} with a message whose content is not text")
        if appended and (message.role == "tool" or message.tool_calls):
            # A tool call or result added out of a round would not pair up in the model's view.
            raise HookError("pre_step", "returned append with a tool call or tool result")
        called.update(call.id for call in message.tool_calls)
        if message.role == "tool" and message.tool_call_id not in called:
            raise HookError("pre_step", f"returned {what} with a tool result of no earlier call")
    return list(messages)


def _checked_choice(turn: TurnState, choice: Any) -> str:
    if isinstance(choice, str) and (
        choice in TOOL_CHOICE_MODES or choice in turn.server_names or choice in turn.client_names
    ):
        return choice
    raise HookError(
        "pre_step",
        "returned tool_choice that is not auto, none, required or the name of an offered tool",
    )


def _summary(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": preview(text_of(message.content))}
