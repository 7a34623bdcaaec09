"""Stuck detection: the same tool calls round after round, or two sets of them in turn, are told
to the model once and then stop the turn as budget_exhausted{kind: "repetition"}."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.hooks import NoHooks, Proceed
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    calls,
    ok,
    run_scripted,
    text,
    user,
)

pytestmark = pytest.mark.anyio


async def scripted(prompt: str, tmp_path: Path, config: LoopConfig | None = None, hooks=None):
    rec, history, _ = await run_scripted(prompt, tmp_path, config, hooks=hooks)
    return rec, history


def notes(history) -> list[str]:
    return [m.content for m in history if m.role == "system"]


async def test_a_repeated_call_is_told_once_then_stops(tmp_path: Path):
    rec, history = await scripted("repeat call", tmp_path)
    # Rounds 1-3 the same clock call: told after the third; the fourth stops the turn.
    assert len(rec.of("llm_request")) == 4
    [note] = notes(history)
    assert note.startswith("You have made the same tool call (clock) 3 rounds in a row")
    told = [a for a in rec.of("hook_action") if a["hook"] == "stuck_detection"]
    assert [(a["action"], a["round"], a["reason"]) for a in told] == [
        ("append", 3, "repeat over 3 rounds")
    ]
    assert rec.of("budget_exhausted") == [{"kind": "repetition", "pattern": "repeat", "rounds": 3}]
    assert rec.terminal | {"status": "budget_exhausted"} == rec.terminal
    assert rec.terminal["reason"] == "repetition: repeat over 3 rounds"
    # The note went to the model in the fourth request, after the third round's result.
    at = [m.role for m in history].index("system")
    assert history[at - 1].role == "tool"


async def test_an_oscillation_is_told_once_then_stops(tmp_path: Path):
    rec, history = await scripted("oscillate", tmp_path)
    # A B A B: told after round 4; round 5 (A again) still oscillates and stops the turn.
    assert len(rec.of("llm_request")) == 5
    [note] = notes(history)
    assert note.startswith("You are alternating between the same two sets of tool calls")
    assert rec.of("budget_exhausted") == [
        {"kind": "repetition", "pattern": "oscillation", "rounds": 4}
    ]


async def test_the_thresholds_are_settings(tmp_path: Path):
    rec, _ = await scripted("repeat call", tmp_path, LoopConfig(repeat_call_limit=5))
    assert len(rec.of("llm_request")) == 6
    rec, _ = await scripted("oscillate", tmp_path, LoopConfig(oscillation_limit=3))
    assert len(rec.of("llm_request")) == 7


async def test_a_model_that_changes_course_goes_on():
    # Same call 3 times (told), then a different call, then the answer.
    same = calls(("lookup", {"q": "a", "page": 1}))
    reordered = calls(("lookup", {"page": 1, "q": "a"}))
    provider = FakeProvider(same, reordered, same, calls(("lookup", {"q": "b"})), text("done"))
    loop = CoreLoop(provider, FakeExecutor({"lookup": ok()}))
    rec = Recorder()
    await loop.run_turn(user("hi"), rec)
    assert rec.terminal["status"] == "completed"
    assert rec.of("budget_exhausted") == []
    # Argument order does not make a call different: canonical JSON.
    assert provider.requests[3].messages[-1].role == "system"


async def test_a_hooks_proceed_keeps_a_stuck_turn_going(tmp_path: Path):
    class Patient(NoHooks):
        def __init__(self) -> None:
            self.stuck: list[str | None] = []

        def tool_made_progress(self, ctx, round_summary):
            self.stuck.append(round_summary.stuck)
            return Proceed() if round_summary.stuck else None

    hooks = Patient()
    rec, _ = await scripted("repeat call", tmp_path, LoopConfig(max_rounds=6), hooks)
    assert hooks.stuck == [None, None, None, "repeat", "repeat", "repeat"]
    assert rec.of("budget_exhausted") == [{"kind": "rounds", "rounds": 6}]
