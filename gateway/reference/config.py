"""``LoopConfig``: the limits of one turn, with the names and defaults frozen by the contract."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import msgspec

from ...contracts.client_errors import ClientError

# Field name → the JSON-ish type names it accepts (for error messages and validation).
_INT_LIMITS = (
    "max_rounds",
    "max_tool_errors",
    "tool_timeout_ms",
    "max_steer_chars",
    "wrap_up_max_tool_rounds",
    "max_tool_result_chars",
    "budget",
    "soft_timeout_ms",
    "wrap_up_hard_cap_ms",
    "idle_stream_timeout_ms",
    "reasoning_without_progress_chars",
    "idle_stream_max_chars",
    "retry_max_attempts",
    "retry_initial_delay_ms",
    "retry_max_delay_ms",
    "retry_max_total_ms",
    "repeat_call_limit",
    "oscillation_limit",
)
# null = not a limit of the loop's own: max_tokens is the model's (idle_stream_max_chars bounds
# what the loop takes), wrap_up_tool_timeout_ms falls back to tool_timeout_ms.
_OPTIONAL_INT_LIMITS = (
    "max_tokens",
    "wrap_up_tool_timeout_ms",
)
_HOUR_MS = 3_600_000
# The largest value each limit takes: a value past it is a typo or a wish for "no limit", and
# either would let one run hold a worker, a connection or memory without end.
UPPER_BOUNDS: dict[str, int] = {
    "max_rounds": 1_000,
    "max_tool_errors": 100,
    "tool_timeout_ms": 24 * _HOUR_MS,
    "max_steer_chars": 1_000_000,
    "wrap_up_max_tool_rounds": 100,
    "max_tool_result_chars": 10_000_000,
    "budget": 100_000_000,
    "soft_timeout_ms": 24 * _HOUR_MS,
    "wrap_up_hard_cap_ms": 24 * _HOUR_MS,
    "idle_stream_timeout_ms": _HOUR_MS,
    "reasoning_without_progress_chars": 10_000_000,
    "idle_stream_max_chars": 10_000_000,
    "max_tokens": 10_000_000,
    "wrap_up_tool_timeout_ms": 24 * _HOUR_MS,
    "retry_max_attempts": 10,
    "retry_initial_delay_ms": 600_000,
    "retry_max_delay_ms": 600_000,
    "retry_max_total_ms": _HOUR_MS,
    "repeat_call_limit": 100,
    "oscillation_limit": 100,
}
RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema")
# A schema is the client's input, kept with every run's config: bounded like one.
MAX_RESPONSE_FORMAT_BYTES = 64 * 1024
_BOOLS = ("tool_dedup", "parallel_tools", "persist_tool_results", "wrap_up_keeps_tools")
STEER_MODES = ("boundary", "interrupt")
# What the model sees of one tool result, at most: ~8k tokens at ~4 characters a token, so a
# few results fit with room to spare even in a 32k-token window (small local models), and a
# 1 MB result cannot overflow any context. The same bound as one steering message.
DEFAULT_MAX_TOOL_RESULT_CHARS = 32_000


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopConfig:
    """Every limit is validated on construction; a bad value raises ``ValueError`` naming it."""

    max_rounds: int = 32
    max_tool_errors: int = 3  # consecutive failed tool results
    tool_dedup: bool = True
    parallel_tools: bool = True
    tool_timeout_ms: int = 300_000
    max_steer_chars: int = 32_000
    steer_mode: str = "boundary"
    wrap_up_max_tool_rounds: int = 4
    persist_tool_results: bool = False
    budget: int = 2_000_000  # tokens: prompt + completion over the turn
    soft_timeout_ms: int = 1_800_000
    wrap_up_hard_cap_ms: int = 300_000  # counted from the soft timeout
    idle_stream_timeout_ms: int = 300_000
    reasoning_without_progress_chars: int = 400_000
    temperature: float | None = None
    max_tokens: int | None = None
    # Wrap-up keeps offering tools for wrap_up_max_tool_rounds rounds (else: none at once).
    wrap_up_keeps_tools: bool = False
    wrap_up_tool_timeout_ms: int | None = None  # per tool call and per model stream in wrap-up
    idle_stream_max_chars: int = 1_000_000  # text + reasoning of a stream with no tool call
    max_tool_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS  # of one result, in the context
    # Retries of a failed model request the provider calls retryable (429, 5xx, a connection
    # lost before the first delta): LangGraph RetryPolicy's 3 attempts, doubling from 0.5 s.
    retry_max_attempts: int = 3  # the first try included
    retry_initial_delay_ms: int = 500
    retry_max_delay_ms: int = 30_000  # one wait, also a server's Retry-After
    retry_max_total_ms: int = 120_000  # waiting and trying, from the first failure
    # Stuck detection: the same tool calls this many rounds in a row, or this many A-B cycles.
    repeat_call_limit: int = 3
    oscillation_limit: int = 2
    # Structured output: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
    # or {"type": "json_object"}, as OpenAI's chat completions spell it.
    response_format: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in _INT_LIMITS:
            _check_int(name, getattr(self, name), optional=False)
        for name in _OPTIONAL_INT_LIMITS:
            _check_int(name, getattr(self, name), optional=True)
        if self.response_format is not None:
            check_response_format(self.response_format)
        for name in _BOOLS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ClientError(f"{name} must be a boolean, got {_type_name(value)}")
        if not isinstance(self.steer_mode, str):
            raise ClientError(f"steer_mode must be a string, got {_type_name(self.steer_mode)}")
        if self.steer_mode not in STEER_MODES:
            raise ClientError(
                "steer_mode must be 'boundary' (steering waits for the round boundary) or "
                f"'interrupt' (steering stops the model's stream or the tools at once), "
                f"got {self.steer_mode[:64]!r}"
            )
        t = self.temperature
        if t is not None:
            if isinstance(t, bool) or not isinstance(t, int | float):
                raise ClientError(f"temperature must be a number or null, got {_type_name(t)}")
            if not 0 <= t <= 2:
                raise ClientError(f"temperature must be between 0 and 2, got {t}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopConfig:
        """Build from a JSON-shaped mapping. Keys this loop does not know (another engine's,
        e.g. ``idle_reasoning_gap_ms``) are left out, not refused (:meth:`unknown_keys` names
        them); a known key with a bad value is an error naming it."""
        if not isinstance(data, dict):
            raise ClientError(f"loop config must be an object, got {_type_name(data)}")
        known = cls.field_names()
        return cls(**{key: value for key, value in data.items() if key in known})

    @classmethod
    def unknown_keys(cls, data: dict[str, Any]) -> list[str]:
        """The keys of ``data`` that are not LoopConfig fields (at most 16, for a log line)."""
        if not isinstance(data, dict):
            return []
        known = cls.field_names()
        return [str(key)[:64] for key in data if key not in known][:16]

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.field_names()}

    def replace(self, **changes: Any) -> LoopConfig:
        return dataclasses.replace(self, **changes)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return type(value).__name__


def _check_int(name: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    # bool is an int subclass; `max_rounds=True` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        expected = "a positive integer or null" if optional else "a positive integer"
        raise ClientError(f"{name} must be {expected}, got {_type_name(value)}")
    if value <= 0:
        raise ClientError(f"{name} must be positive, got {value}")
    upper = UPPER_BOUNDS[name]
    if value > upper:
        raise ClientError(f"{name} must be at most {upper:,}, got {value:,}")


def check_response_format(value: Any) -> None:
    """``response_format`` as OpenAI's chat completions take it; a wrong one named."""
    if not isinstance(value, dict):
        raise ClientError(f"response_format must be an object, got {_type_name(value)}")
    kind = value.get("type")
    if kind not in RESPONSE_FORMAT_TYPES:
        raise ClientError("response_format.type must be one of " + ", ".join(RESPONSE_FORMAT_TYPES))
    if len(msgspec.json.encode(value)) > MAX_RESPONSE_FORMAT_BYTES:
        raise ClientError(f"response_format must be at most {MAX_RESPONSE_FORMAT_BYTES} bytes")
    if kind != "json_schema":
        return
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise ClientError("response_format.json_schema must be an object")
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise ClientError("response_format.json_schema.name must be a non-empty string")
    schema = spec.get("schema", {})
    # Imported here: only a run that asks for structured output pays for jsonschema's import.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise ClientError("response_format.json_schema.schema must be an object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ClientError(
            f"response_format.json_schema.schema is not a valid JSON Schema (at {where})"
        ) from None
