"""Typed payloads for the 15 LoopEvent kinds.

Payloads travel as plain dicts so unknown keys survive every hop unchanged; these Structs are a
*view* of the known keys: what the reference runtime sends, in camelCase as it sends it. Only
the envelope's own shape is enforced on input (``kind`` a string, ``data`` an object): a known
field with a foreign type is an *oddity* (:mod:`contracts.oddities`), carried through unchanged
and logged, never a refusal. Projectors read fields defensively and treat a foreign type as
absent.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from contracts.client_errors import ClientError, describe_input_error

CompletionStatus = Literal[
    "executing", "completed", "failed", "budget_exhausted", "cancelled", "waiting_user"
]


class Payload(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """Base of every payload: unknown keys are ignored by the view, kept by the envelope."""


class StageStart(Payload):
    model: str | None = None
    round: int | None = None


class LlmRequest(Payload):
    round: int
    attempt: int = 1
    model: str | None = None


class LlmResponse(Payload):
    round: int
    attempt: int = 1
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    model: str | None = None


class ContentDelta(Payload):
    delta: str


class ReasoningDelta(Payload):
    delta: str


class ToolCallStart(Payload):
    id: str
    name: str
    round: int | None = None
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolCallResult(Payload):
    id: str
    name: str
    success: bool
    duration_ms: int | float | None = None
    result_preview: str | None = None
    result: Any = None
    error: str | None = None


class ToolError(Payload):
    id: str
    name: str
    error: str


class StageComplete(Payload):
    round: int
    tool_call_count: int = 0
    consecutive_tool_errors: int = 0
    elapsed_ms: int | float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


BudgetKind = Literal["rounds", "tokens"]
BUDGET_KINDS = ("rounds", "tokens")


class BudgetExhausted(Payload):
    # "kind" names the budget; seed 001's Rust engine spells that key "budget"
    # ({"budget": "tokens", "used": 5000}), so either names it (see budget_kind).
    kind: BudgetKind | None = None
    rounds: int | None = None
    used: int | None = None
    budget: BudgetKind | int | None = None


class SoftTimeout(Payload):
    round: int | None = None
    elapsed_ms: int | float | None = None
    soft_timeout_ms: int | None = None


class Steer(Payload):
    content: str
    round: int | None = None


class HookAction(Payload):
    hook: str
    action: str
    reason: str | None = None
    round: int | None = None
    value: Any = None
    delay_ms: int | None = None


class Error(Payload):
    message: str
    round: int | None = None
    phase: str | None = None


class Completion(Payload):
    status: CompletionStatus
    reason: str | None = None
    confidence: float | None = None
    round: int | None = None
    finish_reason: str | None = None
    text_length: int | None = None
    tool_calls: list[Any] | None = None
    tool_call_count: int | None = None
    tool_error_count: int | None = None


PAYLOAD_TYPES: dict[str, type[Payload]] = {
    "stage_start": StageStart,
    "llm_request": LlmRequest,
    "llm_response": LlmResponse,
    "content_delta": ContentDelta,
    "reasoning_delta": ReasoningDelta,
    "tool_call_start": ToolCallStart,
    "tool_call_result": ToolCallResult,
    "tool_error": ToolError,
    "stage_complete": StageComplete,
    "budget_exhausted": BudgetExhausted,
    "soft_timeout": SoftTimeout,
    "steer": Steer,
    "hook_action": HookAction,
    "error": Error,
    "completion": Completion,
}


def budget_kind(data: dict[str, Any]) -> BudgetKind | None:
    """Which budget a ``budget_exhausted`` payload says ran out, under either spelling."""
    for key in ("kind", "budget"):
        value = data.get(key)
        if value in BUDGET_KINDS:
            return value  # type: ignore[no-any-return]
    return None


def tool_failed(kind: str, data: dict[str, Any]) -> bool:
    """Whether a tool result reports a failure: ``tool_error``, ``success: false``, or an
    ``error`` without a boolean ``success`` (a loop that sends no flag, or a foreign one)."""
    success = data.get("success")
    return (
        kind == "tool_error"
        or success is False
        or (success is not True and data.get("error") is not None)
    )


def completion_status(data: dict[str, Any]) -> str:
    """A completion's status as every consumer reads it: the string as sent (a status this
    code does not know is carried through), ``failed`` when it is absent or not a string."""
    status = data.get("status")
    return status if type(status) is str else "failed"


class PayloadError(ClientError):
    """A known kind whose payload has a wrong or missing known field."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"invalid {kind} payload: {detail}")
        self.kind = kind
        self.detail = detail


def payload_view(kind: str, data: dict[str, Any]) -> Payload | None:
    """The known keys of ``data`` as their typed view; ``None`` for an unknown kind.

    :class:`PayloadError` when a known field has a foreign type: for code that wants the strict
    view (the gateway's input paths do not: see :func:`contracts.oddities.oddities`)."""
    typ = PAYLOAD_TYPES.get(kind)
    if typ is None:
        return None
    try:
        return msgspec.convert(data, typ, strict=True)
    except msgspec.ValidationError as exc:
        # msgspec names the path, e.g. "Expected `str`, got `int` - at `$.delta`".
        detail = describe_input_error(exc, root="data", field_prefix="data.")
        raise PayloadError(kind, detail) from None
