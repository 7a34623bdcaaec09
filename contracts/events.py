"""Typed payloads for the 15 LoopEvent kinds.

Payloads travel as plain dicts so unknown keys survive every hop unchanged; these Structs are a
*view* of the known keys: what the reference runtime sends, in camelCase as it sends it. Only
the envelope's own shape is enforced on input (``kind`` a string, ``data`` an object): a known
field with a foreign type is an *oddity* (:mod:`.oddities`), carried through unchanged
and logged, never a refusal. Projectors read fields defensively and treat a foreign type as
absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, UnionType
from typing import Any, Literal, NamedTuple, TypeVar, get_args, get_origin

import msgspec

from .client_errors import ClientError, describe_input_error

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
    arguments: dict[str, Any] = msgspec.field(default_factory=dict[str, Any])


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


# "repetition": the loop stopped a run stuck repeating its tool calls (issue 36).
BudgetKind = Literal["rounds", "tokens", "repetition"]
BUDGET_KINDS = ("rounds", "tokens", "repetition")


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
    view (the gateway's input paths do not: see :func:`loopgate.contracts.oddities.oddities`)."""
    typ = PAYLOAD_TYPES.get(kind)
    if typ is None:
        return None
    try:
        return msgspec.convert(data, typ, strict=True)
    except msgspec.ValidationError as exc:
        # msgspec names the path, e.g. "Expected `str`, got `int` - at `$.delta`".
        detail = describe_input_error(exc, root="data", field_prefix="data.")
        raise PayloadError(kind, detail) from None


# --- tolerant views: what consumers read ------------------------------------------------------
#
# The payload types above say what the reference runtime sends (a missing required field is an
# oddity). Consumers need the other reading: each field they use, typed, and absent when it is
# missing or of a foreign type, so a projector does not re-check types by hand. Views also carry
# the fields loopgate's own consumers read beyond the reference runtime (``costUsd``, a
# completion's ``interrupts`` …). Values a consumer maps even when foreign (tool arguments and
# results, which are any JSON) are not in a view: they are read from the payload. A view costs
# one msgspec convert (~0.1 µs): the projector base reads the one or two fields it needs of the
# events every round carries by hand, in one place (adapters/shared/projector.py).


class View(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    """Base of every tolerant view: every field optional, read with :func:`view_of`."""


class LlmResponseView(View):
    model: str | None = None
    round: int | None = None
    error: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: int | float | None = None


class ToolCallView(View):
    """``tool_call_start`` (its ``arguments`` are any JSON: read from the payload)."""

    id: str | None = None
    name: str | None = None
    round: int | None = None
    # The tool's ACP kind, when the loop knows it (``kindHint`` in some engines).
    kind: str | None = None
    kind_hint: str | None = None


class ToolResultView(View):
    """``tool_call_result`` and ``tool_error`` (``result`` is any JSON: read from the payload)."""

    id: str | None = None
    name: str | None = None
    success: bool | None = None
    error: str | None = None
    result_preview: str | None = None
    duration_ms: int | float | None = None
    deduplicated: bool | None = None


class CompletionView(View):
    # Any string: a status newer than this code is carried through (completion_status).
    status: str | None = None
    reason: str | None = None
    round: int | None = None
    error: str | None = None
    trace_id: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # waiting_user: the client tools the turn waits for, or what the user is asked.
    pending_tool_call_ids: list[str] | None = None
    tool_call_id: str | None = None
    interrupts: list[Any] | None = None


class QuestionView(View):
    """What a user is asked: an interrupt (a ``waiting_user`` completion or an item of its
    ``interrupts``), or the arguments of an ``ask_user``-style tool."""

    interrupt_id: str | None = None
    id: str | None = None
    reason: str | None = None
    message: str | None = None
    question: str | None = None
    prompt: str | None = None
    tool_call_id: str | None = None

    def text(self) -> str | None:
        """The first non-empty of ``message``, ``question``, ``prompt``."""
        return self.message or self.question or self.prompt or None


class PermissionRequestView(View):
    """The gateway's ``permission_request`` (contracts.gateway_events), read tolerantly."""

    request_id: str | None = None
    tool_call: dict[str, Any] | None = None
    options: list[Any] | None = None


class PermissionResultView(View):
    request_id: str | None = None
    tool_call_id: str | None = None
    decision: str | None = None
    by: str | None = None


V = TypeVar("V", bound=View)


class _Field(NamedTuple):
    wire: str  # the payload's key
    name: str  # the view's attribute
    exact: frozenset[type]  # the value's type, exactly (True is no int: msgspec's strict rule)
    items: type | None  # list[str]: each item's type


def _fields(typ: type[View]) -> tuple[_Field, ...]:
    """How to check each field of a view by hand (views use scalars, lists and dicts, alone or
    in a union with None)."""
    fields: list[_Field] = []
    for f in msgspec.structs.fields(typ):
        options = get_args(f.type) if isinstance(f.type, UnionType) else (f.type,)
        items = None
        for option in options:
            args = get_args(option)
            if get_origin(option) is list and args and args[0] is not Any:
                items = args[0]
        exact = frozenset(get_origin(option) or option for option in options)
        fields.append(_Field(f.encode_name, f.name, exact, items))
    return tuple(fields)


_ABSENT = object()  # of no type a view accepts

# Worked out once: msgspec.structs.fields evaluates the annotations on every call.
_VIEW_FIELDS: Mapping[type[View], tuple[_Field, ...]] = MappingProxyType(
    {
        typ: _fields(typ)
        for typ in (
            LlmResponseView,
            ToolCallView,
            ToolResultView,
            CompletionView,
            QuestionView,
            PermissionRequestView,
            PermissionResultView,
        )
    }
)


def view_of(typ: type[V], data: dict[str, Any]) -> V:
    """The fields of ``data`` that ``typ`` names, each absent when missing or of a foreign type;
    unknown keys are ignored. ``data`` must be an object (a TypeError otherwise: the caller
    degrades the event)."""
    try:
        # convert is strict by default; spelling strict=True out costs a third of the call.
        return msgspec.convert(data, typ)
    except msgspec.ValidationError:
        if type(data) is not dict:
            raise TypeError("a payload is an object") from None
    # Rare (a foreign field): checked by hand, a failed convert per field costs ten times more.
    kept: dict[str, Any] = {}
    for field in _VIEW_FIELDS.get(typ) or _fields(typ):
        value = data.get(field.wire, _ABSENT)
        if type(value) not in field.exact:
            continue
        if field.items is not None and any(type(item) is not field.items for item in value):
            continue
        kept[field.name] = value
    return typ(**kept)
