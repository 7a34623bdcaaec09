"""The writer thread's pass over a batch: first deltas found in the run's own events, content
the worker would ignore left out, finished runs forgotten."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.envelope import Envelope
from gateway.hub import Run
from gateway.hub.run import new_record
from gateway.telemetry import relay as relay_module
from gateway.telemetry.relay import Relay
from gateway.telemetry.wire import RunSummary


def make_run(run_id: str, kinds: list[str]) -> Run:
    run = Run(new_record(run_id, run_id, "ingest", 0, {}))
    for seq, kind in enumerate(kinds, start=1):
        data: dict[str, Any] = {"delta": f"d{seq}"} if kind.endswith("_delta") else {}
        if kind == "completion":
            data = {"status": "completed"}
        run.events.append(Envelope(run_id, seq, seq * 10, kind, data))
    return run


def seqs(messages: list[Any]) -> list[Any]:
    return [m.seq if isinstance(m, Envelope) else type(m).__name__ for m in messages]


def spans_only(run: Run) -> list[Any]:
    """What the hub appends to the worker's queue: everything but deltas."""
    return [e for e in run.events if not e.kind.endswith("_delta")]


def test_a_model_calls_first_delta_is_sent_before_its_response() -> None:
    run = make_run("r", ["llm_request", "reasoning_delta", "content_delta", "llm_response"])
    relay = Relay(content=False)
    relay.follow(run)
    assert seqs(relay.prepare(spans_only(run))) == [1, 2, 4]


def test_the_request_and_response_may_come_in_different_batches() -> None:
    run = make_run("r", ["llm_request", "content_delta", "content_delta", "llm_response"])
    relay = Relay(content=False)
    relay.follow(run)
    assert seqs(relay.prepare([run.events[0]])) == [1]
    assert seqs(relay.prepare([run.events[3]])) == [2, 4]


def test_a_call_without_deltas_gets_none() -> None:
    run = make_run("r", ["llm_request", "hook_action", "llm_response"])
    relay = Relay(content=False)
    relay.follow(run)
    assert seqs(relay.prepare(spans_only(run))) == [1, 2, 3]


def test_a_retry_sends_each_attempts_first_delta() -> None:
    kinds = ["llm_request", "content_delta", "llm_request", "content_delta", "llm_response"]
    run = make_run("r", kinds)
    relay = Relay(content=False)
    relay.follow(run)
    assert seqs(relay.prepare(spans_only(run))) == [1, 2, 3, 4, 5]


def test_a_call_cut_short_by_the_runs_end_still_gets_its_first_delta() -> None:
    run = make_run("r", ["llm_request", "content_delta", "completion"])
    relay = Relay(content=False)
    relay.follow(run)
    summary = RunSummary("r", [])
    out = relay.prepare([run.events[0], summary, run.events[2]])
    assert seqs(out) == [1, 2, "RunSummary", 3]
    assert relay.runs == {}  # the summary ends what the relay keeps of the run


def test_runs_it_does_not_follow_pass_through() -> None:
    run = make_run("r", ["llm_request", "content_delta", "llm_response"])
    relay = Relay(content=False)
    assert seqs(relay.prepare(spans_only(run))) == [1, 3]


def test_with_content_capture_on_a_model_calls_deltas_are_sent_whole() -> None:
    kinds = ["content_delta", "llm_request", "content_delta", "content_delta", "llm_response"]
    run = make_run("r", [*kinds, "content_delta", "tool_call_result"])
    run.events[-1] = Envelope("r", 7, 70, "tool_call_result", {"id": "c", "result": "x" * 5_000})
    relay = Relay(content=True)
    relay.follow(run)
    assert relay.runs == {}  # every delta is queued: nothing to look up
    out = relay.prepare(list(run.events))
    # Deltas outside a model call are no one's content; the big result is content.
    assert seqs(out) == [2, 3, 4, 5, 7]
    assert out[-1] is run.events[-1]


def test_content_the_worker_would_ignore_is_left_out() -> None:
    big = Envelope("r", 1, 10, "tool_call_result", {"id": "c", "result": "x" * 5_000})
    args = Envelope("r", 2, 20, "tool_call_start", {"id": "c", "arguments": {"path": "/x"}})
    out = Relay(content=False).prepare([big, args])
    assert [m.data for m in out] == [{"id": "c"}, {"id": "c"}]
    assert big.data["result"] == "x" * 5_000  # the run's own envelopes are untouched
    assert args.data["arguments"] == {"path": "/x"}


def test_finished_runs_whose_end_never_came_through_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(relay_module, "PRUNE_ABOVE", 3)
    relay = Relay(content=False)
    runs = [make_run(f"r{i}", ["llm_request"]) for i in range(5)]
    for run in runs:
        relay.follow(run)
    runs[0].record.state = runs[1].record.state = "finished"
    relay.prepare([runs[0].events[0]])
    assert sorted(relay.runs) == ["r2", "r3", "r4"]
