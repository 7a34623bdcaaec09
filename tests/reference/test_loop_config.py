"""LoopConfig: contract defaults and validation errors that name the field."""

from __future__ import annotations

import pytest

from loopgate.contracts.contract import load_contract
from loopgate.gateway.reference.config import UPPER_BOUNDS, LoopConfig

POSITIVE = [
    "max_rounds",
    "max_tool_errors",
    "tool_timeout_ms",
    "max_steer_chars",
    "wrap_up_max_tool_rounds",
    "budget",
    "soft_timeout_ms",
    "wrap_up_hard_cap_ms",
    "idle_stream_timeout_ms",
    "reasoning_without_progress_chars",
    "max_tokens",
    "wrap_up_tool_timeout_ms",
    "idle_stream_max_chars",
    "max_tool_result_chars",
]


def test_defaults_match_contract():
    assert LoopConfig().to_dict() == load_contract().loop_config


def test_from_dict_round_trip():
    cfg = LoopConfig.from_dict({"max_rounds": 5, "budget": 1000, "temperature": 0.5})
    assert cfg.max_rounds == 5 and cfg.budget == 1000 and cfg.temperature == 0.5
    assert LoopConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("field", POSITIVE)
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_limits_rejected(field: str, value: int):
    with pytest.raises(ValueError, match=f"^{field} must be positive"):
        LoopConfig.from_dict({field: value})


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("max_rounds", "3", "max_rounds must be a positive integer, got str"),
        ("max_rounds", True, "max_rounds must be a positive integer, got boolean"),
        ("max_rounds", 2.5, "max_rounds must be a positive integer, got float"),
        ("max_rounds", None, "max_rounds must be a positive integer, got null"),
        ("budget", "10", "budget must be a positive integer, got str"),
        ("budget", None, "budget must be a positive integer, got null"),
        ("max_tokens", "10", "max_tokens must be a positive integer or null, got str"),
        ("tool_dedup", 1, "tool_dedup must be a boolean, got int"),
        ("persist_tool_results", "yes", "persist_tool_results must be a boolean, got str"),
        ("temperature", "hot", "temperature must be a number or null, got str"),
        ("temperature", 3, "temperature must be between 0 and 2"),
        ("steer_mode", 1, "steer_mode must be a string"),
        ("wrap_up_keeps_tools", "true", "wrap_up_keeps_tools must be a boolean, got str"),
        ("wrap_up_tool_timeout_ms", 1.5, "wrap_up_tool_timeout_ms must be a positive integer"),
        ("idle_stream_max_chars", "9", "idle_stream_max_chars must be a positive integer"),
        ("max_tool_result_chars", None, "max_tool_result_chars must be a positive integer, got"),
    ],
)
def test_wrong_types_named(field: str, value, expected: str):
    with pytest.raises(ValueError, match=expected):
        LoopConfig.from_dict({field: value})


def test_unknown_keys_are_left_out_and_named():
    # Another engine's keys are not refused (issue 13): the reference loop leaves them out,
    # and names them for its log line.
    config = LoopConfig.from_dict({"max_round": 3, "idle_reasoning_gap_ms": 5000})
    assert config == LoopConfig()
    assert LoopConfig.unknown_keys({"max_round": 3, "max_rounds": 2}) == ["max_round"]


def test_steer_mode_boundary_or_interrupt():
    assert LoopConfig(steer_mode="interrupt").steer_mode == "interrupt"
    with pytest.raises(ValueError, match=r"steer_mode must be 'boundary' .* or 'interrupt'"):
        LoopConfig(steer_mode="immediate")


def test_the_seed_fields_and_their_defaults():
    # Seed 001's wrap-up and stream settings, and the bound on a tool result in the context.
    config = LoopConfig.from_dict(
        {
            "wrap_up_keeps_tools": True,
            "wrap_up_tool_timeout_ms": 500,
            "idle_stream_max_chars": 2000,
            "max_tool_result_chars": 100,
        }
    )
    assert (config.wrap_up_keeps_tools, config.wrap_up_tool_timeout_ms) == (True, 500)
    assert (config.idle_stream_max_chars, config.max_tool_result_chars) == (2000, 100)
    default = LoopConfig()
    assert default.wrap_up_keeps_tools is False
    assert default.wrap_up_tool_timeout_ms is None  # tool_timeout_ms applies
    assert default.idle_stream_max_chars == 1_000_000  # bounded by default (issue 36)
    assert default.max_tool_result_chars == 32_000  # bounded by default


@pytest.mark.parametrize(("field", "upper"), sorted(UPPER_BOUNDS.items()))
def test_every_limit_has_an_upper_bound_named_when_passed(field: str, upper: int):
    assert LoopConfig.from_dict({field: upper}).to_dict()[field] == upper
    with pytest.raises(ValueError, match=f"^{field} must be at most {upper:,}, got {upper + 1:,}"):
        LoopConfig.from_dict({field: upper + 1})


def test_every_limit_is_finite_by_default():
    # Only max_tokens (the model's own limit) and wrap_up_tool_timeout_ms (tool_timeout_ms
    # applies) may be null, and they are bounded when set.
    defaults = LoopConfig().to_dict()
    unbounded = {name for name in UPPER_BOUNDS if defaults[name] is None}
    assert unbounded == {"max_tokens", "wrap_up_tool_timeout_ms"}


def test_a_huge_max_rounds_is_refused():
    with pytest.raises(ValueError, match=r"^max_rounds must be at most 1,000, got 1,000,000,000"):
        LoopConfig.from_dict({"max_rounds": 10**9})


def test_constructor_validates_too():
    with pytest.raises(ValueError, match="tool_timeout_ms"):
        LoopConfig(tool_timeout_ms=0)
    with pytest.raises(ValueError, match="must be an object"):
        LoopConfig.from_dict([1])  # type: ignore[arg-type]


def test_frozen():
    with pytest.raises(AttributeError):
        LoopConfig().max_rounds = 3  # type: ignore[misc]
