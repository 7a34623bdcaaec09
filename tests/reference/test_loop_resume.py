"""The reference loop resumed from a run's events (gateway.reference.resume): the conversation
of its completed rounds rebuilt, a round cut mid-way done again (docs/scale.md, "Takeover after
a crash")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopgate.contracts.messages import Message, ToolCall
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.resume import completed_rounds
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tools import DemoTools
from tests.reference.loop_support import Recorder, check_stream, run_scripted, user

pytestmark = pytest.mark.anyio

PROMPT = "Please work out 12 * 7 + 3 for me."


def as_journal(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Events as a resumed run's request carries them."""
    return [{"seq": i, "kind": k, "data": d} for i, (k, d) in enumerate(events, 1)]


def cut_in_round(events: list[tuple[str, dict[str, Any]]], round_: int) -> list[dict[str, Any]]:
    """The events up to a few into round ``round_`` (its model response unfinished)."""
    start = next(
        i for i, (k, d) in enumerate(events) if k == "stage_start" and d["round"] == round_
    )
    return as_journal(events[: start + 4])


async def resumed_turn(
    events: list[dict[str, Any]], tmp_path: Path
) -> tuple[Recorder, list[Message]]:
    loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(tmp_path))
    resumed = completed_rounds(events)
    rec = Recorder()
    history = await loop.run_turn(user(PROMPT) + resumed.messages, rec, resumed=resumed)
    check_stream(rec.events)
    return rec, history


async def test_a_run_cut_in_its_second_round_goes_on_from_its_first(tmp_path: Path) -> None:
    straight, history, _ = await run_scripted(PROMPT, tmp_path)
    events = cut_in_round(straight.events, 2)
    resumed = completed_rounds(events)
    # The first round's messages, as the uninterrupted turn had them.
    assert resumed.rounds == 1
    assert resumed.tool_names == ["calculate"]
    assert resumed.messages == history[1:3]
    rec, again = await resumed_turn(events, tmp_path)
    # Only the second round, done again: the answer the uninterrupted turn gave.
    assert rec.events[0] == ("stage_start", {"model": "loopgate-scripted", "round": 2})
    assert rec.text() == "".join(
        d["delta"] for k, d in straight.events[len(events) - 4 :] if k == "content_delta"
    )
    assert rec.terminal["status"] == "completed"
    assert rec.terminal["round"] == 2 and rec.terminal["toolCalls"] == ["calculate"]
    assert again == history


async def test_a_run_cut_in_its_first_round_starts_over(tmp_path: Path) -> None:
    straight, history, _ = await run_scripted(PROMPT, tmp_path)
    events = cut_in_round(straight.events, 1)
    assert completed_rounds(events).rounds == 0
    rec, again = await resumed_turn(events, tmp_path)
    assert rec.kinds() == straight.kinds()
    assert again == history


def test_what_an_attempt_left_unfinished_before_a_resume_is_dropped() -> None:
    events = as_journal(
        [
            ("content_delta", {"delta": "Half an ans"}),
            ("tool_call_start", {"id": "c0", "name": "clock", "arguments": {}}),
            ("run_resumed", {"attempt": 2, "afterSeq": 2}),
            ("content_delta", {"delta": "Checking."}),
            ("tool_call_start", {"id": "c1", "name": "read_file", "arguments": {"path": "x"}}),
            (
                "tool_call_result",
                {"id": "c1", "name": "read_file", "success": False, "error": "no x"},
            ),
            ("completion", {"status": "executing", "reason": "tool_calls", "round": 1}),
            ("steer", {"content": "be brief", "round": 2}),
            ("content_delta", {"delta": "cut he"}),
        ]
    )
    resumed = completed_rounds(events)
    assert resumed.rounds == 1
    # The steer was the user's, and stays; the cut round's text goes (it is done again).
    assert resumed.messages == [
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=[ToolCall(id="c1", name="read_file", arguments={"path": "x"})],
        ),
        Message(role="tool", tool_call_id="c1", name="read_file", content="Error: no x"),
        Message(role="user", content="be brief"),
    ]
