"""What the trace projector says, and the GenAI semantic-convention names it says it with.

Span records name spans by stable keys (``run``, ``chat.3``, ``tool.<call id>``); the
attribute names are OpenTelemetry's GenAI conventions, plus ``loopgate.tenant``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ...contracts.messages import Message

AttrValue = str | bool | int | float | list[str]
Attributes = dict[str, AttrValue]
SpanKind = Literal["internal", "client"]

RUN = "run"
TOOL = "tool."
APPROVAL = "approval."
# Content capture keeps the newest input messages only (a long history is in earlier traces).
MAX_INPUT_MESSAGES = 32

# GenAI semantic conventions (Development status); spelled out so a rename is one grep away.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
# Who the run is for (semconv's enduser namespace, Development status); the tenant is ours.
ENDUSER_ID = "enduser.id"
TENANT = "loopgate.tenant"


class SpanStart(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str
    kind: SpanKind
    # Key of the parent span; None for the run span (its parent is the incoming traceparent).
    parent: str | None
    start_ns: int
    attributes: Attributes


class SpanEnd(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    end_ns: int
    attributes: Attributes
    # None leaves the status unset (success: instrumentation never sets OK); else ERROR + this.
    error: str | None = None


class SpanEvent(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str
    ts: int
    attributes: Attributes


Record = SpanStart | SpanEnd | SpanEvent


class TraceContext(msgspec.Struct, frozen=True, kw_only=True):
    """What the projector knows about the run before its first event."""

    run_id: str
    thread_id: str
    source: str
    created_at: int
    agent_name: str = "loopgate"
    provider_name: str = "unknown"
    input: tuple[Message, ...] = ()
    # The run's owner; None leaves the enduser attributes out (a recorded stream has none).
    enduser_id: str | None = None
    tenant: str | None = None
