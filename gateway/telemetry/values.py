"""Attribute values as OpenTelemetry takes them: GenAI message shapes, snake_case names,
integers OTLP can carry."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

from ...contracts.messages import Message
from ...contracts.parts import text_of
from .records import Attributes

INT64_MAX = (1 << 63) - 1
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def genai_messages(messages: Sequence[Message], clip: Callable[[str], str]) -> list[dict[str, Any]]:
    """Messages in the GenAI conventions' shape (role + parts), each text clipped."""
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.content:
            if m.role == "tool":
                parts.append(
                    {
                        "type": "tool_call_response",
                        "id": m.tool_call_id,
                        "result": clip(text_of(m.content)),
                    }
                )
            else:
                parts.append({"type": "text", "content": clip(text_of(m.content))})
        for call in m.tool_calls:
            parts.append(
                {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        out.append({"role": m.role, "parts": parts})
    return out


def snake_case(name: str) -> str:
    """``delayMs`` → ``delay_ms``: attribute names follow OTel's snake_case."""
    return CAMEL.sub("_", name).lower()


def is_int64(value: Any) -> TypeGuard[int]:
    # OTLP carries 64-bit integers: a bigger one would fail the whole export batch.
    return type(value) is int and -INT64_MAX - 1 <= value <= INT64_MAX


def copy_int(data: dict[str, Any], src: str, attrs: Attributes, dst: str) -> None:
    value = data.get(src)
    if is_int64(value):
        attrs[dst] = value
