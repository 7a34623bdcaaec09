"""A loopgate thread as pydantic-ai message history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import ModelRequestPart, ModelResponsePart

from .content import user_content


def to_message_history(messages: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """A loopgate thread (``{role, content, tool_calls?, tool_call_id?, name?}`` dicts) as
    pydantic-ai message history.

    System, user and tool messages in a row make one ``ModelRequest``; an assistant message makes
    a ``ModelResponse`` of its text and tool calls. Reasoning is left out: providers only take
    back thinking they signed themselves.
    """
    history: list[ModelMessage] = []
    parts: list[ModelRequestPart] = []
    tool_names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "assistant":
            if parts:
                history.append(ModelRequest(parts=parts))
                parts = []
            response: list[ModelResponsePart] = [TextPart(content)] if content else []
            for call in message.get("tool_calls") or ():
                tool_names[call["id"]] = call["name"]
                response.append(
                    ToolCallPart(call["name"], call.get("arguments") or {}, tool_call_id=call["id"])
                )
            if response:
                history.append(ModelResponse(parts=response))
        elif role == "tool":
            call_id = message.get("tool_call_id") or ""
            name = message.get("name") or tool_names.get(call_id, "")
            parts.append(ToolReturnPart(name, content, tool_call_id=call_id))
        elif role == "system":
            parts.append(SystemPromptPart(content))
        elif role == "user":
            parts.append(UserPromptPart(user_content(content)))
    if parts:
        history.append(ModelRequest(parts=parts))
    return history
