"""The settings of takeover (docs/scale.md, "Takeover after a crash"): how many attempts a run
gets, and which loops say their runs can be resumed."""

from __future__ import annotations

import pytest

from loopgate.gateway.plugs.build import build_loop
from loopgate.gateway.plugs.source import LoopGuards, LoopSource
from loopgate.gateway.settings import load_settings


def test_attempts_are_bounded_both_ways() -> None:
    assert load_settings({}).max_run_attempts == 3
    assert load_settings({"LOOPGATE_MAX_RUN_ATTEMPTS": "10"}).max_run_attempts == 10
    with pytest.raises(ValueError, match="max_run_attempts must be at most 10, got 11"):
        load_settings({"LOOPGATE_MAX_RUN_ATTEMPTS": "11"})
    with pytest.raises(ValueError, match="max_run_attempts must be positive, got 0"):
        load_settings({"LOOPGATE_MAX_RUN_ATTEMPTS": "0"})


@pytest.mark.parametrize(
    "plug", [{"loop_url": "http://127.0.0.1:9/run"}, {"loop_cmd": "python -c pass"}]
)
def test_a_plugged_loop_is_resumable_only_when_the_operator_says_so(plug: dict[str, str]) -> None:
    def source(**given: object) -> LoopSource:
        return LoopSource(build_loop(load_settings({}, {**plug, **given})), LoopGuards(), {})

    assert source().resumable is False
    assert source(loop_resumable=True).resumable is True


def test_the_reference_loop_is_resumable() -> None:
    assert LoopSource(build_loop(load_settings({})), LoopGuards(), {}).resumable is True
