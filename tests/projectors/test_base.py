"""The projector base (adapters/shared/projector.py): lifecycle, closing on every path,
orphans, unknown kinds, foreign types, bookkeeping — through a subclass that names each hook."""

from __future__ import annotations

from typing import Any

import pytest

from loopgate.adapters.shared.projector import (
    REASONING,
    SEEN_CALLS,
    TEXT,
    Call,
    RunProjector,
    SeenCall,
    Segment,
    seen_calls,
)
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.events import (
    CompletionView,
    LlmResponseView,
    PermissionRequestView,
    PermissionResultView,
    QuestionView,
    ToolCallView,
    ToolResultView,
    view_of,
)
from loopgate.contracts.projector import ProjectorContext


class Named(RunProjector[str]):
    """Every hook as a readable line: what the base asks a protocol to show, in order."""

    def on_start(self) -> list[str]:
        return ["start"]

    def passthrough(self, envelope: Envelope) -> list[str]:
        return [f"pass {envelope.kind}"]

    def on_unknown(self, envelope: Envelope) -> list[str]:
        return [f"unknown {envelope.kind}"]

    def open_round(self, number: int, envelope: Envelope) -> list[str]:
        return [f"round {number}"]

    def close_round(self, number: int) -> list[str]:
        return [f"/round {number}"]

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[str]:
        return [f"{segment.kind} {segment.id}", *self.on_delta(segment, delta, envelope)]

    def close_segment(self, segment: Segment) -> list[str]:
        return [f"/{segment.kind} {segment.id}"]

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[str]:
        return [f"delta {delta!r}"]

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[str]:
        return [f"call {call.id} {call.name} {call.arguments!r}"]

    def announce_call(self, call: Call, envelope: Envelope) -> list[str]:
        return [f"announce {call.id} {call.name}"]

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[str]:
        return [f"result {call.id}{' failed' if failed else ''}"]

    def close_call(self, call: Call, status: str) -> list[str]:
        return [f"/call {call.id} {status}"]

    def on_terminal(self, status: str, envelope: Envelope) -> list[str]:
        return [f"end {status}"]

    def on_truncated(self, reason: str) -> list[str]:
        return [f"cut {reason}"]


def context(**options: Any) -> ProjectorContext:
    return ProjectorContext(run_id="r", thread_id="t", options=options)


def run(
    events: list[tuple[str, Any]],
    *,
    close: str | None = None,
    seen: dict[str, SeenCall] | None = None,
) -> list[str]:
    p = Named(context(**{SEEN_CALLS: seen}) if seen else context())
    out = p.start()
    for seq, (kind, data) in enumerate(events, 1):
        out += p.feed(Envelope("r", seq, seq * 1_000_000, kind, data))
    return out + p.close(close)


ROUND = [
    ("stage_start", {"model": "m"}),
    ("llm_request", {"round": 1}),
    ("reasoning_delta", {"delta": "hm"}),
    ("content_delta", {"delta": "a"}),
    ("content_delta", {"delta": "b"}),
    ("tool_call_start", {"id": "c1", "name": "f", "arguments": {"x": 1}}),
    ("tool_call_result", {"id": "c1", "name": "f", "success": True}),
    ("stage_complete", {"round": 1}),
    ("completion", {"status": "executing"}),
]


# --- lifecycle ----------------------------------------------------------------------------


def test_a_round_opens_and_closes_its_parts_in_order() -> None:
    assert run([*ROUND, ("completion", {"status": "completed"})]) == [
        "start",
        "round 1",
        "pass stage_start",
        "pass llm_request",
        "reasoning_delta r:reasoning:3",
        "delta 'hm'",
        "/reasoning_delta r:reasoning:3",
        "content_delta r:msg:4",
        "delta 'a'",
        "delta 'b'",
        "/content_delta r:msg:4",
        "call c1 f {'x': 1}",
        "result c1",
        "pass stage_complete",
        "/round 1",
        "pass completion",  # executing: the round is already over
        "pass completion",
        "end completed",
    ]


def test_a_stream_without_stages_opens_rounds_when_it_needs_them() -> None:
    out = run([("content_delta", {"delta": "a"}), ("completion", {"status": "executing"})] * 2)
    rounds = ["round 1", "/round 1", "round 2", "/round 2"]
    assert [line for line in out if "round" in line] == rounds


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled", "waiting_user", "new"])
def test_every_terminal_closes_segment_calls_and_round_before_its_message(status: str) -> None:
    events = [
        ("content_delta", {"delta": "a"}),
        ("tool_call_start", {"id": "c1", "name": "f"}),
        ("tool_call_start", {"id": "c2", "name": "g"}),
        ("content_delta", {"delta": "b"}),
        ("completion", {"status": status}),
    ]
    assert run(events)[-7:] == [
        "delta 'b'",
        "/content_delta r:msg:4",
        "pass completion",
        f"/call c1 {status}",
        f"/call c2 {status}",
        "/round 1",
        f"end {status}",
    ]


def test_close_closes_everything_then_says_why() -> None:
    events = [("tool_call_start", {"id": "c1", "name": "f"}), ("reasoning_delta", {"delta": "x"})]
    assert run(events, close="producer gone")[-4:] == [
        "/reasoning_delta r:reasoning:2",
        "/call c1 failed",
        "/round 1",
        "cut producer gone",
    ]
    assert run([])[-1] == "cut truncated"


def test_a_protocol_ends_its_stream_early_through_finish() -> None:
    class Interrupting(Named):
        def on_permission_request(
            self, view: PermissionRequestView, envelope: Envelope
        ) -> list[str]:
            return self.finish(envelope, "waiting_user", [f"ask {view.request_id}"])

    p = Interrupting(context())
    p.feed(Envelope("r", 1, 1, "content_delta", {"delta": "a"}))
    out = p.feed(Envelope("r", 2, 2, "permission_request", {"requestId": "q", "toolCall": {}}))
    assert out == ["/content_delta r:msg:1", "pass permission_request", "/round 1", "ask q"]
    assert p.finished
    assert p.feed(Envelope("r", 3, 3, "content_delta", {"delta": "late"})) == []
    assert p.close() == []


def test_nothing_after_the_end() -> None:
    p = Named(context())
    assert p.feed(Envelope("r", 1, 1, "completion", {"status": "completed"}))[-1] == "end completed"
    assert p.feed(Envelope("r", 2, 2, "content_delta", {"delta": "x"})) == []
    assert p.close("again") == []


def test_on_finish_comes_first_for_parts_only_the_protocol_has() -> None:
    class WithSpans(Named):
        def on_finish(self, status: str) -> list[str]:
            return [f"own parts {status}"]

    p = WithSpans(context())
    p.feed(Envelope("r", 1, 1, "content_delta", {"delta": "a"}))
    assert p.close()[:2] == ["own parts failed", "/content_delta r:msg:1"]


# --- orphans --------------------------------------------------------------------------------


def test_a_result_whose_call_was_never_seen_is_announced_first() -> None:
    out = run([("tool_call_result", {"id": "c9", "name": "lookup", "error": "boom"})])
    assert out[1:4] == ["round 1", "announce c9 lookup", "result c9 failed"]
    assert "/call c9" not in " ".join(out)  # answered: not in flight at the end


def test_an_orphan_that_names_no_tool_degrades_and_a_second_answer_too() -> None:
    out = run(
        [
            ("tool_error", {"id": "c9", "error": "boom"}),
            ("tool_call_start", {"id": "c1", "name": "f"}),
            ("tool_call_result", {"id": "c1", "name": "f", "success": True}),
            ("tool_call_result", {"id": "c1", "name": "f", "success": True}),
        ]
    )
    assert out[1:] == [
        "pass tool_error",
        "round 1",
        "call c1 f None",
        "result c1",
        "pass tool_call_result",
        "/round 1",
        "cut truncated",
    ]


def test_calls_the_client_already_saw_are_no_orphans() -> None:
    seen = {"c1": SeenCall("f", answered=False), "c0": SeenCall("g", answered=True)}
    out = run(
        [
            ("tool_call_result", {"id": "c1", "name": "f", "success": True}),
            ("tool_call_result", {"id": "c0", "name": "g", "success": True}),
        ],
        seen=seen,
    )
    assert out[1:] == ["round 1", "result c1", "pass tool_call_result", "/round 1", "cut truncated"]


def test_seen_calls_still_in_flight_are_closed_at_the_end() -> None:
    out = run([], seen={"c1": SeenCall("f", answered=False)})
    assert out == ["start", "/call c1 failed", "cut truncated"]


def test_seen_calls_follows_the_base_rules() -> None:
    def env(seq: int, kind: str, **data: Any) -> Envelope:
        return Envelope("r", seq, seq, kind, data)

    history = [
        env(1, "tool_call_start", id="a", name="f"),
        env(2, "tool_call_start", id="b", name="g"),
        env(3, "tool_call_result", id="a", name="f", success=True),
        env(4, "tool_error", id="orphan", name="h", error="x"),
        env(5, "tool_error", id="nameless", error="x"),
        env(6, "tool_call_start", id=7, name="bad id"),
        env(7, "permission_request", requestId="q"),
    ]
    assert seen_calls(history) == {
        "a": SeenCall("f", answered=True),
        "b": SeenCall("g", answered=False),
        "orphan": SeenCall("h", answered=True),
    }


# --- unknown kinds, foreign types -----------------------------------------------------------


def test_unknown_kinds_go_to_their_hook_and_known_ones_without_a_part_pass_through() -> None:
    out = run([("x_vendor", {"a": 1}), ("hook_action", {}), ("steer", {}), ("soft_timeout", {})])
    assert out[1:5] == ["unknown x_vendor", "pass hook_action", "pass steer", "pass soft_timeout"]


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("content_delta", {"delta": 5}),
        ("content_delta", {}),
        ("reasoning_delta", {"delta": None}),
        ("tool_call_start", {"id": 7, "name": "f"}),
        ("tool_call_start", {"id": "c", "name": ["f"]}),
        ("tool_call_result", {"id": 7, "name": "f"}),
        ("tool_error", {"name": "f"}),
        ("content_delta", None),
        ("llm_response", None),
        ("completion", None),
        ("tool_call_start", "not an object"),
    ],
)
def test_an_unusable_key_field_degrades_the_event_and_opens_nothing(kind: str, data: Any) -> None:
    p = Named(context())
    assert p.feed(Envelope("r", 1, 1, kind, data)) == [f"pass {kind}"]
    assert (p.segment, p.in_round, p.calls, p.finished) == (None, False, {}, False)


def test_a_foreign_delta_inside_a_segment_degrades_and_the_segment_goes_on() -> None:
    out = run(
        [
            ("content_delta", {"delta": "a"}),
            ("content_delta", {"delta": {"text": "b"}}),
            ("content_delta", {"delta": "c"}),
        ]
    )
    assert out[2:6] == ["content_delta r:msg:1", "delta 'a'", "pass content_delta", "delta 'c'"]


@pytest.mark.parametrize("status", [None, 7, ["x"], "", "halted_by_policy"])
def test_any_status_but_executing_ends_the_run(status: Any) -> None:
    data = {} if status is None else {"status": status}
    expected = status if isinstance(status, str) else "failed"
    assert run([("completion", data)])[-1] == f"end {expected}"


# --- bookkeeping ----------------------------------------------------------------------------


def test_usage_is_summed_per_model_from_counts_that_are_counts() -> None:
    p = Named(context())
    events = [
        ("stage_start", {"model": "m1"}),
        ("llm_response", {"promptTokens": 10, "completionTokens": 2}),
        ("llm_response", {"promptTokens": 5, "cachedTokens": 3, "model": "m2"}),
        ("llm_response", {"promptTokens": "many", "completionTokens": True, "totalTokens": -1}),
        ("llm_request", {"model": 42}),
        ("llm_response", {"reasoningTokens": 4, "totalTokens": 16}),
    ]
    for seq, (kind, data) in enumerate(events, 1):
        p.feed(Envelope("r", seq, seq, kind, data))
    assert {m: counts(u) for m, u in p.usage.items()} == {
        "m1": {"input_tokens": 10, "output_tokens": 2, "reasoning_tokens": 4, "total_tokens": 16},
        "m2": {"input_tokens": 5, "cached_tokens": 3},
    }
    assert p.usage_totals() == (15, 2)


def counts(usage: Any) -> dict[str, int]:
    return {k: v for k in usage.__struct_fields__ if (v := getattr(usage, k)) is not None}


def test_budget_and_last_error() -> None:
    p = Named(context())
    events = [
        ("budget_exhausted", {"budget": "tokens", "used": 9}),
        ("budget_exhausted", {"used": 10}),
        ("error", {"message": "first"}),
        ("error", {"message": {"code": 1}}),
        ("error", {"message": ""}),
    ]
    for seq, (kind, data) in enumerate(events, 1):
        assert p.feed(Envelope("r", seq, seq, kind, data)) == [f"pass {kind}"]
    assert p.budget == {"used": 10}  # the last payload, as sent
    assert p.budget_kind == "tokens"  # the last budget one of them named
    assert p.last_error == "first"  # the last message that is a message


def test_identity_protocols_track_no_parts() -> None:
    class Identity(Named):
        tracks_parts = False

    p = Identity(context())
    lines = [
        out for seq, (k, d) in enumerate(ROUND, 1) for out in p.feed(Envelope("r", seq, 0, k, d))
    ]
    assert lines == [f"pass {kind}" for kind, _ in ROUND]
    assert (p.segment, p.rounds, p.calls, p.usage) == (None, 0, {}, {})
    assert p.feed(Envelope("r", 99, 0, "completion", {"status": "done"})) == [
        "pass completion",
        "end done",
    ]


# --- views ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typ", "data", "expected"),
    [
        (
            ToolCallView,
            {"id": "c", "name": 5, "kindHint": "read"},
            {"id": "c", "kind_hint": "read"},
        ),
        (
            ToolResultView,
            {"id": "c", "success": "yes", "durationMs": 1.5},
            {"id": "c", "duration_ms": 1.5},
        ),
        (LlmResponseView, {"promptTokens": True, "costUsd": 2}, {"cost_usd": 2}),
        (
            CompletionView,
            {"status": "halted", "pendingToolCallIds": ["a", 1], "interrupts": [1]},
            {"status": "halted", "interrupts": [1]},
        ),
        (PermissionRequestView, {"requestId": "q", "toolCall": []}, {"request_id": "q"}),
        (PermissionResultView, {"decision": "allow_once", "by": 3}, {"decision": "allow_once"}),
        (QuestionView, {"question": "why?", "message": ""}, {"question": "why?", "message": ""}),
    ],
)
def test_a_view_keeps_the_fields_of_their_type_and_drops_the_foreign_ones(
    typ: Any, data: dict[str, Any], expected: dict[str, Any]
) -> None:
    view = view_of(typ, data)
    got = {k: getattr(view, k) for k in view.__struct_fields__ if getattr(view, k) is not None}
    assert got == expected


def test_a_view_of_something_that_is_no_object_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        view_of(ToolCallView, None)  # type: ignore[arg-type]
    assert view_of(QuestionView, {"prompt": "p", "question": ""}).text() == "p"


def test_segment_kinds_are_the_delta_kinds() -> None:
    assert (TEXT, REASONING) == ("content_delta", "reasoning_delta")
