"""The sans-IO projector: goldens for every recording, valid MCP, and the cases no recording has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from conformance.runner import (
    EXPECTED,
    golden_path,
    load_stream,
    regenerate_command,
    render_golden,
    stream_paths,
)
from loopgate.adapters.mcp import ADAPTER
from loopgate.adapters.mcp.projector import (
    TAIL_CHARS,
    Answer,
    McpItem,
    McpProjector,
    Progress,
    tail,
)
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import ProjectorContext, as_served, project_run

STREAMS = {p.stem: p for p in stream_paths()}
HOW = f"regenerate after review: {regenerate_command('mcp')}"


def project(events: list[Envelope], close: str | None = None) -> list[McpItem]:
    p = McpProjector(ProjectorContext(run_id="r", thread_id="t"))
    out = list(p.start())
    for event in events:
        out.extend(p.feed(event))
    out.extend(p.close(close))
    return out


def env(seq: int, kind: str, data: Any) -> Envelope:
    return Envelope("r", seq, 0, kind, data)


def messages(items: list[McpItem]) -> list[str]:
    return [i.message for i in items if isinstance(i, Progress)]


def answer(items: list[McpItem]) -> Answer:
    assert isinstance(items[-1], Answer)
    assert sum(isinstance(i, Answer) for i in items) == 1
    return items[-1]


def strict(model: type[Any], raw: dict[str, Any]) -> None:
    """Valid for the SDK's own model, and nothing dropped on the way."""
    parsed = model.model_validate(raw)
    kept = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert kept == raw, f"{model.__name__} changed the message: {raw}"


@pytest.mark.parametrize("stream", list(STREAMS.values()), ids=lambda p: p.stem)
def test_golden_matches_and_is_valid_mcp(stream: Path) -> None:
    path = golden_path("mcp", stream)
    assert path.exists(), HOW
    assert render_golden("mcp", stream) == path.read_bytes(), f"{path.name} differs; {HOW}"
    *notes, last = [json.loads(line) for line in path.read_bytes().splitlines()]
    for n, note in enumerate(notes, 1):
        strict(types.JSONRPCNotification, note)
        strict(types.ProgressNotification, {k: v for k, v in note.items() if k != "jsonrpc"})
        assert note["params"]["progress"] == n and note["params"]["progressToken"] == 1
    strict(types.JSONRPCResponse, last)
    strict(types.CallToolResult, last["result"])
    assert last["id"] == 1
    # Every event of the run says something, but the terminal one: the result says that.
    served = as_served(load_stream(stream))
    shown = {n["params"]["_meta"]["loopgate"].get("seq") for n in notes}
    assert shown - {None} == {e.seq for e in served[:-1]}
    assert ADAPTER.render(project_items(stream)) == path.read_bytes()


def project_items(stream: Path) -> list[McpItem]:
    return project_run(ADAPTER, as_served(load_stream(stream)))


def test_no_stale_goldens() -> None:
    stale = [p.name for p in (EXPECTED / "mcp").glob("*.jsonl") if p.stem not in STREAMS]
    assert not stale, HOW


@pytest.mark.parametrize(
    ("stream", "status", "error"),
    [
        ("parallel-tools", "completed", False),
        ("waiting-user", "waiting_user", False),
        ("client-tool", "waiting_user", False),
        ("provider-error", "failed", True),
        ("cancel-mid-text", "cancelled", True),
        ("max-rounds", "budget_exhausted", True),
        ("seed-engine-budget", "budget_exhausted", True),
        ("truncated", "failed", True),
        ("tolerant-payloads", "halted_by_policy", False),
    ],
)
def test_how_a_run_ends_is_the_result(stream: str, status: str, error: bool) -> None:
    result = answer(project_items(STREAMS[stream]))
    assert (result.meta["status"], result.is_error) == (status, error)
    assert result.meta["runId"] == result.meta["threadId"] == stream


def test_results_in_words() -> None:
    said = {name: answer(project_items(STREAMS[name])).text for name in STREAMS}
    assert said["one-tool-round"] == "The result of 17 * 23 + 7 is 398."
    assert said["parallel-tools"].startswith("Let me check two things first.\n\nIt is ")
    assert said["provider-error"] == (
        "The run failed (provider_error): the scripted model lost its connection"
    )
    assert said["cancel-mid-text"].startswith("The run was cancelled.\n\nThe answer so far:\n\n")
    assert said["max-rounds"] == "The run stopped: its rounds budget ran out."
    assert said["seed-engine-budget"].startswith("The run stopped: its tokens budget ran out.")
    assert said["client-tool"].startswith(
        "The run is waiting for the result of confirm_booking, run by its client."
    )
    assert said["tolerant-payloads"].endswith("[The run ended (halted_by_policy).]")


def test_open_tool_calls_are_closed_before_the_result() -> None:
    items = project_items(STREAMS["cancel-mid-tool"])
    assert messages(items)[-2:] == [
        'calling tool sleep: {"seconds":30}',
        "tool sleep was cancelled",
    ]
    cut = project([env(1, "tool_call_start", {"id": "c1", "name": "sleep", "arguments": {}})], "x")
    assert messages(cut)[-1] == "tool sleep did not finish"
    assert answer(cut).text == "The run ended without a final answer (x)."
    assert answer(cut).is_error and answer(cut).meta["reason"] == "x"


def test_an_orphan_result_is_announced_first() -> None:
    items = project([env(1, "tool_call_result", {"id": "c9", "name": "clock", "success": True})])
    assert messages(items)[1:] == ["calling tool clock", "tool clock answered"]


def test_a_failed_attempt_is_no_part_of_the_answer() -> None:
    events = [
        env(1, "llm_request", {"round": 1, "attempt": 1}),
        env(2, "content_delta", {"delta": "Half an ans"}),
        env(3, "llm_response", {"round": 1, "error": "connection lost"}),
        env(4, "llm_request", {"round": 1, "attempt": 2}),
        env(5, "content_delta", {"delta": "The whole answer."}),
        env(6, "llm_response", {"round": 1}),
        env(7, "completion", {"status": "completed"}),
    ]
    items = project(events)
    assert answer(items).text == "The whole answer."
    assert messages(items)[3:6] == [
        "the model failed: connection lost",
        "asking the model (attempt 2)",
        "The whole answer.",
    ]


def test_unknown_kinds_carry_their_payload() -> None:
    items = project([env(1, "x_memory", {"items": [1, 2]}), env(2, "error", {"message": 5})])
    progress = [i for i in items if isinstance(i, Progress)][1:]
    assert [(p.message, p.meta) for p in progress] == [
        ("event x_memory", {"seq": 1, "kind": "x_memory", "data": {"items": [1, 2]}}),
        ("event error", {"seq": 2, "kind": "error", "data": {"message": 5}}),
    ]
    assert answer(items).text == "The run ended without a final answer (truncated)."


def test_a_question_from_an_interrupt_and_approvals() -> None:
    call = {"id": "c1", "name": "write_note", "arguments": {"name": "n"}}
    items = project(
        [
            env(1, "tool_call_start", call),
            env(2, "permission_request", {"requestId": "q1", "toolCall": call}),
            env(
                3,
                "permission_result",
                {"requestId": "q1", "toolCallId": "c1", "decision": "allow_once", "by": "timeout"},
            ),
            env(4, "completion", {"status": "waiting_user", "interrupts": [{"message": "Which?"}]}),
        ]
    )
    assert messages(items)[2:4] == [
        "waiting for approval to run tool write_note",
        "tool write_note: allow_once (timeout)",
    ]
    assert answer(items).text.startswith(
        'Which?\n\n[The run is waiting for an answer: call run again with thread_id "t"'
    )


def test_progress_messages_stay_short() -> None:
    long = "word " * 200
    items = project(
        [env(1, "content_delta", {"delta": long}), env(2, "reasoning_delta", {"delta": long})]
    )
    for message in messages(items):
        assert len(message) <= TAIL_CHARS
    assert tail("abc") == "abc"
    assert tail("x" * 50 + " the newest words", 20) == "…the newest words"  # at a word
    assert tail("y" * 100, 10) == "…" + "y" * 9  # no word starts near the cut
    assert answer(items).is_error
