"""The AG-UI 1.0 events loopgate emits, as msgspec Structs.

Wire keys are camelCase and every event carries its ``type`` tag first. Optional fields default to
``UNSET`` and are left out of the JSON: the JS client rejects an optional field sent as ``null``.
Fields the protocol requires as a fixed literal (``role``) have no default, because
``omit_defaults`` would drop a defaulted value from the wire.

``gc=False``: events hold only strings, numbers and JSON payloads, never cycles, so the collector
need not track them (cheaper allocation on the hot path).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "UNSET",
    "AguiEvent",
    "CancelledOutcome",
    "Custom",
    "Interrupt",
    "InterruptOutcome",
    "ReasoningEnd",
    "ReasoningMessageContent",
    "ReasoningMessageEnd",
    "ReasoningMessageStart",
    "ReasoningStart",
    "RunError",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "StepStarted",
    "SuccessOutcome",
    "TextMessageContent",
    "TextMessageEnd",
    "TextMessageStart",
    "TokenUsage",
    "ToolCallArgs",
    "ToolCallEnd",
    "ToolCallResult",
    "ToolCallStart",
]


class AguiEvent(
    msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True, kw_only=True, gc=False
):
    """Base of every event: ``timestamp`` is integer milliseconds (a float fails the JS client)."""

    timestamp: int | UnsetType = UNSET


class _Part(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True, gc=False):
    """A nested object of an event (outcome, interrupt, usage entry)."""


# -- run lifecycle ---------------------------------------------------------------------------


class RunStarted(AguiEvent, tag="RUN_STARTED"):
    thread_id: str
    run_id: str
    protocol_version: str | UnsetType = UNSET
    # {"traceId", "traceparent"} of the run's trace, so a UI can link to the dashboard.
    metadata: dict[str, Any] | UnsetType = UNSET


class TokenUsage(_Part):
    """One entry per model; counts absent when the loop did not report them (never zero-filled)."""

    model: str | UnsetType = UNSET
    input_tokens: int | UnsetType = UNSET
    output_tokens: int | UnsetType = UNSET
    total_tokens: int | UnsetType = UNSET
    reasoning_tokens: int | UnsetType = UNSET
    cached_input_tokens: int | UnsetType = UNSET


class Interrupt(_Part):
    id: str
    reason: str
    message: str | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    # JSON Schema of the ``payload`` the client should resume with.
    response_schema: dict[str, Any] | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET


class _Outcome(_Part, tag_field="type"):
    pass


class SuccessOutcome(_Outcome, tag="success"):
    pending_tool_call_ids: list[str] | UnsetType = UNSET


class InterruptOutcome(_Outcome, tag="interrupt"):
    interrupts: list[Interrupt]


class CancelledOutcome(_Outcome, tag="cancelled"):
    pass


Outcome = SuccessOutcome | InterruptOutcome | CancelledOutcome


class RunFinished(AguiEvent, tag="RUN_FINISHED"):
    thread_id: str
    run_id: str
    result: Any | UnsetType = UNSET
    outcome: Outcome | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class RunError(AguiEvent, tag="RUN_ERROR"):
    message: str
    code: str | UnsetType = UNSET
    usage: list[TokenUsage] | UnsetType = UNSET


class StepStarted(AguiEvent, tag="STEP_STARTED"):
    step_name: str


class StepFinished(AguiEvent, tag="STEP_FINISHED"):
    step_name: str


# -- text ------------------------------------------------------------------------------------


class TextMessageStart(AguiEvent, tag="TEXT_MESSAGE_START"):
    message_id: str
    role: str


class TextMessageContent(AguiEvent, tag="TEXT_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class TextMessageEnd(AguiEvent, tag="TEXT_MESSAGE_END"):
    message_id: str


# -- reasoning -------------------------------------------------------------------------------


class ReasoningStart(AguiEvent, tag="REASONING_START"):
    message_id: str


class ReasoningMessageStart(AguiEvent, tag="REASONING_MESSAGE_START"):
    message_id: str
    role: str


class ReasoningMessageContent(AguiEvent, tag="REASONING_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class ReasoningMessageEnd(AguiEvent, tag="REASONING_MESSAGE_END"):
    message_id: str


class ReasoningEnd(AguiEvent, tag="REASONING_END"):
    message_id: str


# -- tools -----------------------------------------------------------------------------------


class ToolCallStart(AguiEvent, tag="TOOL_CALL_START"):
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | UnsetType = UNSET


class ToolCallArgs(AguiEvent, tag="TOOL_CALL_ARGS"):
    tool_call_id: str
    delta: str


class ToolCallEnd(AguiEvent, tag="TOOL_CALL_END"):
    tool_call_id: str


class ToolCallResult(AguiEvent, tag="TOOL_CALL_RESULT"):
    message_id: str
    tool_call_id: str
    content: str
    role: str


# -- extension point -------------------------------------------------------------------------


class Custom(AguiEvent, tag="CUSTOM"):
    name: str
    value: Any
