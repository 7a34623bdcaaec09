"""``LoopConfig``: the limits of one turn, with the names and defaults frozen by the contract."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...contracts.client_errors import ClientError

# Field name → the JSON-ish type names it accepts (for error messages and validation).
_INT_LIMITS = (
    "max_rounds",
    "max_tool_errors",
    "tool_timeout_ms",
    "max_steer_chars",
    "wrap_up_max_tool_rounds",
    "max_tool_result_chars",
)
_OPTIONAL_INT_LIMITS = (
    "budget",
    "soft_timeout_ms",
    "wrap_up_hard_cap_ms",
    "idle_stream_timeout_ms",
    "reasoning_without_progress_chars",
    "max_tokens",
    "wrap_up_tool_timeout_ms",
    "idle_stream_max_chars",
)
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
    budget: int | None = None  # tokens: prompt + completion over the turn
    soft_timeout_ms: int | None = None
    wrap_up_hard_cap_ms: int | None = None  # counted from the soft timeout
    idle_stream_timeout_ms: int | None = None
    reasoning_without_progress_chars: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    # Wrap-up keeps offering tools for wrap_up_max_tool_rounds rounds (else: none at once).
    wrap_up_keeps_tools: bool = False
    wrap_up_tool_timeout_ms: int | None = None  # per tool call and per model stream in wrap-up
    idle_stream_max_chars: int | None = None  # text + reasoning of a stream with no tool call
    max_tool_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS  # of one result, in the context

    def __post_init__(self) -> None:
        for name in _INT_LIMITS:
            _check_int(name, getattr(self, name), optional=False)
        for name in _OPTIONAL_INT_LIMITS:
            _check_int(name, getattr(self, name), optional=True)
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
