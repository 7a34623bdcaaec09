"""A run of the reference loop resumed from its journal (another instance's attempt was lost):
the conversation of its completed rounds, rebuilt from their events.

A round is complete once its ``completion{executing}`` is in the journal: its model response
(text, reasoning, tool calls) and its tool results become the history's messages, as the
round had appended them. A round cut before that (and everything an earlier attempt left after
its last complete round, up to each ``run_resumed``) is done again. Steering messages were the
user's and stay. A tool result is the whole one when the run persisted it
(``persist_tool_results``), else its preview: what the journal kept.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...contracts.contract import TERMINAL_EXCLUDED
from ...contracts.gateway_events import RUN_RESUMED
from ...contracts.messages import Message, ToolCall

_encode = msgspec.json.Encoder().encode


class Resumed(msgspec.Struct, kw_only=True):
    """What the completed rounds left: their messages, how many, their tools' names."""

    messages: list[Message] = msgspec.field(default_factory=list)
    rounds: int = 0
    tool_names: list[str] = msgspec.field(default_factory=list)


class _Round:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: dict[str, Message] = {}

    def messages(self) -> list[Message]:
        said = Message(
            role="assistant",
            content="".join(self.text),
            reasoning="".join(self.reasoning) or None,
            tool_calls=list(self.calls),
        )
        return [said, *(self.results[c.id] for c in self.calls if c.id in self.results)]


def completed_rounds(events: list[dict[str, Any]]) -> Resumed:
    done = Resumed()
    current = _Round()
    for event in events:
        kind, data = event.get("kind"), event.get("data")
        if not isinstance(data, dict):
            continue
        if kind == "content_delta":
            current.text.append(_text(data.get("delta")))
        elif kind == "reasoning_delta":
            current.reasoning.append(_text(data.get("delta")))
        elif kind == "tool_call_start":
            arguments = data.get("arguments")
            current.calls.append(
                ToolCall(
                    id=_text(data.get("id")),
                    name=_text(data.get("name")),
                    arguments=arguments if isinstance(arguments, dict) else {},
                )
            )
        elif kind in ("tool_call_result", "tool_error"):
            call_id = _text(data.get("id"))
            current.results[call_id] = Message(
                role="tool",
                tool_call_id=call_id,
                name=_text(data.get("name")),
                content=_observation(kind, data),
            )
        elif kind == "steer":
            done.messages.append(Message(role="user", content=_text(data.get("content"))))
        elif kind == "completion" and data.get("status") == TERMINAL_EXCLUDED:
            done.messages += current.messages()
            done.rounds += 1
            done.tool_names += [c.name for c in current.calls]
            current = _Round()
        elif kind == RUN_RESUMED:
            current = _Round()
    return done


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _observation(kind: str, data: dict[str, Any]) -> str:
    """What the model was shown of a result, as near as the journal has it."""
    result = data.get("result")
    if result is None:
        content = _text(data.get("resultPreview"))
    else:
        content = result if isinstance(result, str) else _encode(result).decode()
    if kind == "tool_call_result" and data.get("success") is True:
        return content
    error = f"Error: {_text(data.get('error')) or 'the tool failed'}"
    return f"{error}\n{content}" if content else error
