"""A run's conversation rebuilt from its events: what the loop said and did, as messages.

A conversation that spans runs (an ACP session, a thread) starts each run with the history so
far plus the new user message; this is how the "so far" is recovered from a journal, also in a
process that never saw the runs live.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.messages import Message, ToolCall

# Said for a tool call that never got its result (cancelled, truncated, a client tool): chat
# models reject an assistant tool call without a matching tool message.
NO_RESULT = "Error: no result (the run ended before this tool call finished)"


class _Round:
    __slots__ = ("calls", "reasoning", "results", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: dict[str, str] = {}

    def empty(self) -> bool:
        return not (self.text or self.reasoning or self.calls)

    def flush(self, out: list[Message]) -> None:
        text = "".join(self.text)
        if not text and not self.calls:
            return  # reasoning alone is not a message a model can be shown again
        out.append(
            Message(
                role="assistant",
                content=text,
                reasoning="".join(self.reasoning) or None,
                tool_calls=list(self.calls),
            )
        )
        for call in self.calls:
            out.append(
                Message(
                    role="tool",
                    tool_call_id=call.id,
                    name=call.name,
                    content=self.results.get(call.id, NO_RESULT),
                )
            )


def _observation(data: dict[str, Any]) -> str:
    if data.get("success") is True:
        result = data.get("result")
        if isinstance(result, str):
            return result
        preview = data.get("resultPreview")
        return preview if isinstance(preview, str) else ""
    error = data.get("error")
    return f"Error: {error if isinstance(error, str) and error else 'the tool failed'}"


def messages_from_events(envelopes: Iterable[Envelope]) -> list[Message]:
    """Assistant text, tool calls and tool results of one run, in order (pure, never raises).

    Steering messages become user messages where they were applied. The partial output of a
    model attempt that was retried is dropped, as the loop itself drops it.
    """
    out: list[Message] = []
    current = _Round()
    for env in envelopes:
        kind, data = env.kind, env.data
        if not isinstance(data, dict):
            continue
        if kind == "content_delta":
            delta = data.get("delta")
            if isinstance(delta, str):
                current.text.append(delta)
        elif kind == "reasoning_delta":
            delta = data.get("delta")
            if isinstance(delta, str):
                current.reasoning.append(delta)
        elif kind == "tool_call_start":
            call_id, name = data.get("id"), data.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                args = data.get("arguments")
                current.calls.append(
                    ToolCall(
                        id=call_id, name=name, arguments=args if isinstance(args, dict) else {}
                    )
                )
        elif kind == "tool_call_result":
            if isinstance(data.get("id"), str):
                current.results[data["id"]] = _observation(data)
        elif kind == "tool_error":
            if isinstance(data.get("id"), str):
                current.results[data["id"]] = f"Error: {data.get('error') or 'the tool failed'}"
        elif kind == "llm_request":
            attempt = data.get("attempt")
            if isinstance(attempt, int) and attempt > 1 and not current.calls:
                current.text.clear()
                current.reasoning.clear()
        elif kind == "steer":
            content = data.get("content")
            if isinstance(content, str):
                current.flush(out)
                current = _Round()
                out.append(Message(role="user", content=content))
        elif kind == "completion" and data.get("status") == "executing":
            current.flush(out)
            current = _Round()
    if not current.empty():
        current.flush(out)
    return out


def last_user_text(messages: Iterable[Message]) -> str | None:
    """The text of the last user message (what a run was asked), if any."""
    text = None
    for message in messages:
        if message.role == "user":
            text = message.content
    return text
