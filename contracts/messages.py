"""Conversation history as the loop sees it (OpenAI chat shape, the common denominator)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .parts import Content

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class Message(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: Role
    # Text, or a list of parts when the message carries attachments (contracts/parts.py).
    content: Content = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool offered to the model; ``parameters`` is a JSON Schema object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
