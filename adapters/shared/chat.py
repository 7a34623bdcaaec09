"""Chat-message pieces that AG-UI and OpenAI requests share: an assistant's tool calls.

Both protocols send a tool call in OpenAI's shape, ``{id, type: "function", function: {name,
arguments}}``, with the arguments as JSON *text*; the loop's history holds them as an object.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ...contracts import json_input
from ...contracts.messages import ToolCall


class FunctionCall(msgspec.Struct):
    name: str
    arguments: str


class AssistantToolCall(msgspec.Struct):
    id: str
    function: FunctionCall
    type: Literal["function"] = "function"


def parse_arguments(raw: str) -> dict[str, Any]:
    """A call's arguments text as the object the loop's history holds (the text itself, as
    ``{"_raw": text}``, when it is no JSON object: a client's odd call still reaches the model)."""
    try:
        # Bounded like the body it came in: json.loads would recurse without limit.
        value = json_input.decode(raw) if raw else {}
    except ValueError:  # malformed or too deep: kept as the text it was
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def to_tool_calls(calls: list[AssistantToolCall] | None) -> list[ToolCall]:
    """An assistant message's tool calls as the loop's history holds them."""
    return [
        ToolCall(id=c.id, name=c.function.name, arguments=parse_arguments(c.function.arguments))
        for c in calls or []
    ]
