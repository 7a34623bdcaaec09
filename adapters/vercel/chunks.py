"""What loopgate sends a Vercel AI SDK client: UI message chunks, as msgspec Structs.

The shapes of the ``ai`` package's ``uiMessageChunkSchema`` (``ai`` 7, stream protocol ``v1``):
each chunk is one ``data:`` line of JSON whose ``type`` names it; optional fields default to
``UNSET`` and are left out of the JSON (the schema rejects ``null`` for them). The stream ends
with ``data: [DONE]``, the one data line that is not JSON.

``gc=False``: these hold strings and JSON payloads, never cycles.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "DONE",
    "UNSET",
    "Abort",
    "Chunk",
    "Data",
    "Done",
    "Error",
    "Finish",
    "FinishStep",
    "MessageMetadata",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningStart",
    "Start",
    "StartStep",
    "SteeringMessage",
    "TextDelta",
    "TextEnd",
    "TextPart",
    "TextStart",
    "ToolInputAvailable",
    "ToolInputDelta",
    "ToolInputStart",
    "ToolOutputAvailable",
    "ToolOutputError",
]


class _Chunk(msgspec.Struct, kw_only=True, gc=False, tag_field="type", rename="camel"):
    pass


class Start(_Chunk, tag="start"):
    message_id: str
    message_metadata: Any | UnsetType = UNSET


class StartStep(_Chunk, tag="start-step"):
    pass


class FinishStep(_Chunk, tag="finish-step"):
    pass


class TextStart(_Chunk, tag="text-start"):
    id: str


class TextDelta(_Chunk, tag="text-delta"):
    id: str
    delta: str


class TextEnd(_Chunk, tag="text-end"):
    id: str


class ReasoningStart(_Chunk, tag="reasoning-start"):
    id: str


class ReasoningDelta(_Chunk, tag="reasoning-delta"):
    id: str
    delta: str


class ReasoningEnd(_Chunk, tag="reasoning-end"):
    id: str


class ToolInputStart(_Chunk, tag="tool-input-start"):
    tool_call_id: str
    tool_name: str
    # True: the loop runs the call (the client does not, and sends nothing back for it);
    # absent: the client's to run (its onToolCall; sendAutomaticallyWhen waits for its output).
    provider_executed: bool | UnsetType = UNSET


class ToolInputDelta(_Chunk, tag="tool-input-delta"):
    tool_call_id: str
    input_text_delta: str  # JSON text, whole: the loop hands over a call's arguments at once


class ToolInputAvailable(_Chunk, tag="tool-input-available"):
    tool_call_id: str
    tool_name: str
    input: Any
    provider_executed: bool | UnsetType = UNSET


class ToolOutputAvailable(_Chunk, tag="tool-output-available"):
    tool_call_id: str
    output: Any
    provider_executed: bool | UnsetType = UNSET


class ToolOutputError(_Chunk, tag="tool-output-error"):
    tool_call_id: str
    error_text: str
    provider_executed: bool | UnsetType = UNSET


class TextPart(msgspec.Struct, gc=False, tag_field="type", tag="text"):
    text: str


class SteeringMessage(_Chunk, tag="steering-message"):
    """A user message added to the run while it went (loopgate's ``steer``)."""

    id: str
    parts: list[TextPart]


class Error(_Chunk, tag="error"):
    error_text: str


class MessageMetadata(_Chunk, tag="message-metadata"):
    message_metadata: Any


class Finish(_Chunk, tag="finish"):
    # stop, length, content-filter, tool-calls, error, interrupted, other
    finish_reason: str | UnsetType = UNSET
    message_metadata: Any | UnsetType = UNSET


class Abort(_Chunk, tag="abort"):
    reason: str | UnsetType = UNSET


class Data(msgspec.Struct, kw_only=True, gc=False):
    """A ``data-<name>`` part: its type is made per event (``data-loopgate-<kind>``), so it is
    a field, not a tag. A transient one reaches the client's ``onData`` and is not kept in the
    message."""

    type: str
    id: str
    data: Any
    transient: bool | UnsetType = UNSET


class Done(msgspec.Struct, gc=False):
    """The stream's end: ``data: [DONE]``."""


DONE = Done()

Chunk = (
    Start
    | StartStep
    | FinishStep
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolInputAvailable
    | ToolOutputAvailable
    | ToolOutputError
    | SteeringMessage
    | Error
    | MessageMetadata
    | Finish
    | Abort
    | Data
    | Done
)
