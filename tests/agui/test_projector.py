"""The AG-UI projector's mapping, one rule per test (real-client checks live next door)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from loopgate.adapters.agui import MEDIA_TYPE, PROTOCOL_VERSION, AguiAdapter, AguiProjector
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import Adapter
from tests.agui.agui_streams import T0, Stream, all_streams, context, garbage, project, tool_rounds

STREAMS = all_streams()
VERSIONS = ["1.0", None]
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}
# Opening/closing pairs the client tracks by id.
PAIRS = {
    "TEXT_MESSAGE_START": ("text", "messageId", True),
    "TEXT_MESSAGE_END": ("text", "messageId", False),
    "REASONING_START": ("span", "messageId", True),
    "REASONING_END": ("span", "messageId", False),
    "REASONING_MESSAGE_START": ("reasoning", "messageId", True),
    "REASONING_MESSAGE_END": ("reasoning", "messageId", False),
    "TOOL_CALL_START": ("tool", "toolCallId", True),
    "TOOL_CALL_END": ("tool", "toolCallId", False),
    "STEP_STARTED": ("step", "stepName", True),
    "STEP_FINISHED": ("step", "stepName", False),
}
INSIDE = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId"),
    "REASONING_MESSAGE_CONTENT": ("reasoning", "messageId"),
    "TOOL_CALL_ARGS": ("tool", "toolCallId"),
}


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def assert_well_formed(events: list[dict[str, Any]]) -> None:
    """The ordering rules @ag-ui/client's verifyEvents enforces, plus 'closed before an error'."""
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in TERMINAL
    assert sum(e["type"] in TERMINAL for e in events) == 1
    open_: dict[str, set[str]] = {k: set() for k in ("text", "span", "reasoning", "tool", "step")}
    for event in events:
        kind = event["type"]
        if kind in PAIRS:
            group, key, opening = PAIRS[kind]
            ident = event[key]
            if opening:
                assert ident not in open_[group], f"{kind} {ident} opened twice"
                open_[group].add(ident)
            else:
                assert ident in open_[group], f"{kind} {ident} not open"
                open_[group].discard(ident)
        elif kind in INSIDE:
            group, key = INSIDE[kind]
            assert event[key] in open_[group], f"{kind} outside its segment"
        elif kind in TERMINAL:
            assert not any(open_.values()), f"{kind} with {open_} still open"


def assert_no_null(value: Any, path: str = "$") -> None:
    """Optional protocol fields are omitted, never null (CUSTOM.value is the loop's own data)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if path == "$" and key == "value":
                continue
            assert item is not None, f"null at {path}.{key}"
            assert_no_null(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            assert_no_null(item, f"{path}[{i}]")


# -- every stream, both client generations ---------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_stream_is_well_formed_and_null_free(name: str, version: str | None) -> None:
    events = project(STREAMS[name], version)
    assert_well_formed(events)
    for event in events:
        assert_no_null({k: v for k, v in event.items() if k not in ("value", "result")})
        if "timestamp" in event:
            assert type(event["timestamp"]) is int


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_output_is_deterministic(name: str) -> None:
    first = msgspec.json.encode(project(STREAMS[name]))
    assert msgspec.json.encode(project(STREAMS[name])) == first


def test_timestamp_is_envelope_ns_as_int_ms() -> None:
    events = project(Stream().add("content_delta", delta="x").envelopes)
    assert of_type(events, "TEXT_MESSAGE_CONTENT")[0]["timestamp"] == (T0 + 1_500_000) // 1_000_000
    assert "timestamp" not in events[0]  # RUN_STARTED precedes every envelope


# -- run start, protocol version gating ------------------------------------------------------


def test_run_started_declares_version_only_when_client_named_one() -> None:
    assert project([], "1.0")[0] == {
        "type": "RUN_STARTED",
        "threadId": "thread-run-1",
        "runId": "run-1",
        "protocolVersion": PROTOCOL_VERSION,
    }
    assert project([], None)[0] == {
        "type": "RUN_STARTED",
        "threadId": "thread-run-1",
        "runId": "run-1",
    }


def test_declared_version_is_major_minor_even_if_client_sent_a_patch() -> None:
    # The JS client warns "uninterpretable" on anything but "major.minor".
    assert project([], "1.0.0")[0]["protocolVersion"] == "1.0"


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_pre_1_0_clients_get_no_1_0_only_fields(name: str) -> None:
    for event in project(STREAMS[name], None):
        assert "outcome" not in event
        assert "usage" not in event
        assert "protocolVersion" not in event


# -- text and reasoning ----------------------------------------------------------------------


def test_content_opens_assistant_message_lazily() -> None:
    s = Stream().add("content_delta", delta="Hel").add("content_delta", delta="lo")
    events = project(s.envelopes)
    assert types(events)[:5] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
    ]
    start = events[2]
    assert start["role"] == "assistant"
    assert start["messageId"] == "run-1:msg:1"
    assert [e["delta"] for e in of_type(events, "TEXT_MESSAGE_CONTENT")] == ["Hel", "lo"]


def test_reasoning_opens_span_and_message() -> None:
    events = project(Stream().add("reasoning_delta", delta="hmm").envelopes)
    assert types(events)[2:5] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
    ]
    assert events[3]["role"] == "reasoning"
    assert events[2]["messageId"] == events[3]["messageId"] == "run-1:reasoning:1"


def test_switching_closes_the_other_segment_and_ids_never_repeat() -> None:
    s = Stream()
    for kind in ("reasoning_delta", "content_delta", "reasoning_delta", "content_delta"):
        s.add(kind, delta="x")
    kinds = types(project(s.envelopes))
    assert kinds[2:] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_ERROR",
    ]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_text_reasoning_and_result_messages_never_share_an_id(name: str) -> None:
    events = project(STREAMS[name])
    text = {e["messageId"] for e in of_type(events, "TEXT_MESSAGE_START")}
    reasoning = {e["messageId"] for e in of_type(events, "REASONING_MESSAGE_START")}
    results = [e["messageId"] for e in of_type(events, "TOOL_CALL_RESULT")]
    assert len(results) == len(set(results))
    assert not text & reasoning
    assert not (text | reasoning) & set(results)
    starts = of_type(events, "TEXT_MESSAGE_START") + of_type(events, "REASONING_MESSAGE_START")
    assert len(starts) == len(text) + len(reasoning)


def test_empty_delta_is_forwarded() -> None:
    events = project(Stream().add("content_delta", delta="").envelopes)
    assert of_type(events, "TEXT_MESSAGE_CONTENT")[0]["delta"] == ""


# -- tools -----------------------------------------------------------------------------------


def test_tool_call_closes_text_and_names_it_as_parent() -> None:
    s = Stream().add("content_delta", delta="Let me check.")
    s.add("tool_call_start", id="c1", name="weather", arguments={"city": "Oslo", "n": [1]})
    events = project(s.envelopes)
    assert types(events)[2:8] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    start, args = events[5], events[6]
    assert start == {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "weather",
        "parentMessageId": "run-1:msg:1",
        "timestamp": start["timestamp"],
    }
    assert json.loads(args["delta"]) == {"city": "Oslo", "n": [1]}
    assert args["toolCallId"] == "c1"


def test_calls_without_text_share_one_round_parent_and_next_round_gets_its_own() -> None:
    s = Stream().add("tool_call_start", id="a", name="f", arguments={})
    s.add("tool_call_start", id="b", name="f", arguments={})
    s.add("completion", status="executing")
    s.add("tool_call_start", id="c", name="f", arguments={})
    starts = of_type(project(s.envelopes), "TOOL_CALL_START")
    parents = [e["parentMessageId"] for e in starts]
    assert parents[0] == parents[1] == "run-1:msg:1"
    assert parents[2] == "run-1:msg:4"


def test_missing_arguments_are_an_empty_object() -> None:
    events = project(Stream().add("tool_call_start", id="a", name="f").envelopes)
    assert of_type(events, "TOOL_CALL_ARGS")[0]["delta"] == "{}"


@pytest.mark.parametrize(
    ("payload", "content"),
    [
        ({"success": True, "resultPreview": "short…", "result": "long"}, "short…"),
        ({"success": True, "result": {"a": 1}}, '{"a":1}'),
        ({"success": True, "result": "plain"}, "plain"),
        ({"success": True}, ""),
        ({"success": False, "error": "timed out", "resultPreview": "p"}, "error: timed out"),
        ({"success": False, "resultPreview": "exit 1"}, "error: exit 1"),
        ({"success": False}, "error: tool failed"),
        ({"error": "no success flag"}, "error: no success flag"),
    ],
)
def test_tool_result_content(payload: dict[str, Any], content: str) -> None:
    s = Stream().add("tool_call_result", {"id": "c1", "name": "f", **payload})
    result = of_type(project(s.envelopes), "TOOL_CALL_RESULT")[0]
    assert result == {
        "type": "TOOL_CALL_RESULT",
        "messageId": "run-1:result:1",
        "toolCallId": "c1",
        "content": content,
        "role": "tool",
        "timestamp": result["timestamp"],
    }


def test_tool_error_is_a_visible_failed_result() -> None:
    s = Stream().add("tool_call_start", id="c1", name="f", arguments={})
    s.add("tool_error", id="c1", name="f", error="executor raised KeyError")
    result = of_type(project(s.envelopes), "TOOL_CALL_RESULT")[0]
    assert result["content"] == "error: executor raised KeyError"
    assert result["toolCallId"] == "c1"


def test_second_answer_to_one_call_is_kept_as_custom_not_a_second_tool_message() -> None:
    s = Stream().add("tool_error", id="c1", name="f", error="boom")
    s.add("tool_call_result", id="c1", name="f", success=False, error="boom")
    events = project(s.envelopes)
    assert len(of_type(events, "TOOL_CALL_RESULT")) == 1
    assert of_type(events, "CUSTOM")[0]["name"] == "loopgate.tool_call_result"


# -- steps -----------------------------------------------------------------------------------


def test_stage_start_opens_a_round_step_and_closes_the_previous_one() -> None:
    s = Stream().add("stage_start", model="m").add("content_delta", delta="a")
    s.add("stage_start", model="m")
    events = project(s.envelopes)
    steps = [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "round 1"),
        ("STEP_FINISHED", "round 1"),
        ("STEP_STARTED", "round 2"),
        ("STEP_FINISHED", "round 2"),
    ]
    kinds = types(events)
    assert kinds.index("TEXT_MESSAGE_END") < kinds.index("STEP_FINISHED")
    assert of_type(events, "CUSTOM")[0] == {
        "type": "CUSTOM",
        "name": "loopgate.stage_start",
        "value": {"model": "m"},
        "timestamp": events[2]["timestamp"],
    }


def test_reference_round_ordering() -> None:
    events = project(tool_rounds({"status": "completed"}).envelopes)
    steps = [(e["type"], e["stepName"]) for e in events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "round 1"),
        ("STEP_FINISHED", "round 1"),
        ("STEP_STARTED", "round 2"),
        ("STEP_FINISHED", "round 2"),
    ]
    kinds = types(events)
    # stage_complete closes round 1; completion{executing} follows as CUSTOM between the steps.
    first_end = kinds.index("STEP_FINISHED")
    assert events[first_end - 1]["name"] == "loopgate.stage_complete"
    assert events[first_end + 1]["name"] == "loopgate.completion"
    assert events[first_end + 1]["value"]["status"] == "executing"
    assert kinds[-3:] == ["CUSTOM", "STEP_FINISHED", "RUN_FINISHED"]


def test_steps_open_lazily_when_stage_start_is_absent() -> None:
    events = project(STREAMS["ingested"])
    names = [e["stepName"] for e in of_type(events, "STEP_STARTED")]
    assert names == ["round 1", "round 2"]
    assert_well_formed(events)


def test_completion_executing_is_not_terminal() -> None:
    s = Stream().add("content_delta", delta="a").add("completion", status="executing")
    s.add("content_delta", delta="b")
    events = project(s.envelopes)
    assert "RUN_FINISHED" not in types(events)
    assert len(of_type(events, "TEXT_MESSAGE_START")) == 2
    assert events[-1]["code"] == "truncated"


# -- terminal mapping ------------------------------------------------------------------------


def terminal(name: str, version: str | None = "1.0") -> dict[str, Any]:
    return project(STREAMS[name], version)[-1]


def test_completed_v1_carries_summed_usage_per_model() -> None:
    event = terminal("completed")
    assert event["type"] == "RUN_FINISHED"
    assert "outcome" not in event and "result" not in event
    assert event["usage"] == [
        {"model": "m-1", "inputTokens": 300, "outputTokens": 30, "totalTokens": 330}
    ]
    assert event["threadId"] == "thread-run-1"
    assert event["runId"] == "run-1"


def test_usage_keeps_models_apart_and_counts_reasoning_tokens() -> None:
    s = Stream()
    s.add("llm_response", round=1, promptTokens=5, completionTokens=2, model="a")
    s.add("llm_response", round=2, promptTokens=7, reasoningTokens=3, model="b")
    s.add("llm_response", round=3, promptTokens=1, model="a")
    s.add("llm_response", round=4)
    s.add("completion", status="completed")
    assert project(s.envelopes)[-1]["usage"] == [
        {"model": "a", "inputTokens": 6, "outputTokens": 2},
        {"model": "b", "inputTokens": 7, "reasoningTokens": 3},
    ]


def test_usage_without_model_is_attributed_to_the_rounds_model() -> None:
    s = Stream().add("stage_start", model="engine-model")
    s.add("llm_request", round=1)
    s.add("llm_response", round=1, promptTokens=4, cachedTokens=3, costUsd=0.1)
    s.add("completion", status="completed")
    assert project(s.envelopes)[-1]["usage"] == [
        {"model": "engine-model", "inputTokens": 4, "cachedInputTokens": 3}
    ]


def test_no_usage_reported_means_no_usage_field() -> None:
    event = project(Stream().add("completion", status="completed").envelopes)[-1]
    assert event == {
        "type": "RUN_FINISHED",
        "threadId": "thread-run-1",
        "runId": "run-1",
        "timestamp": event["timestamp"],
    }


def test_cancelled() -> None:
    assert terminal("cancelled")["outcome"] == {"type": "cancelled"}
    legacy = terminal("cancelled", None)
    assert legacy["type"] == "RUN_FINISHED"
    assert legacy["result"] == {"status": "cancelled", "reason": "user"}


def test_cancel_mid_text_closes_the_message_first() -> None:
    kinds = types(project(STREAMS["cancelled"]))
    assert kinds[-4:] == ["TEXT_MESSAGE_END", "CUSTOM", "STEP_FINISHED", "RUN_FINISHED"]


def test_waiting_user_is_an_interrupt() -> None:
    assert terminal("interrupt")["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {
                "id": "run-1:interrupt:3",
                "reason": "clarification",
                "message": "Which city?",
                "toolCallId": "ask-1",
            }
        ],
    }
    legacy = terminal("interrupt", None)
    assert legacy["result"]["status"] == "waiting_user"
    assert legacy["result"]["interrupts"][0]["message"] == "Which city?"


def test_interrupt_message_falls_back_to_the_suspended_calls_question() -> None:
    s = Stream().add(
        "tool_call_start", id="ask", name="ask_user", arguments={"question": "A or B?"}
    )
    s.add("tool_call_result", id="ask", name="ask_user", success=True, resultPreview="A or B?")
    s.add("completion", status="waiting_user", reason="ask_user", toolCallId="ask")
    assert project(s.envelopes)[-1]["outcome"]["interrupts"] == [
        {"id": "run-1:interrupt:3", "reason": "ask_user", "message": "A or B?", "toolCallId": "ask"}
    ]


def test_waiting_user_takes_listed_interrupts_and_ignores_bad_entries() -> None:
    s = Stream().add(
        "completion",
        status="waiting_user",
        reason="approval",
        interrupts=[{"id": "i-1", "reason": "confirm", "message": "Delete?"}, "junk", {}],
    )
    assert project(s.envelopes)[-1]["outcome"]["interrupts"] == [
        {"id": "i-1", "reason": "confirm", "message": "Delete?"},
        {"id": "run-1:interrupt:1:2", "reason": "approval"},
    ]


def test_client_tool_is_success_with_pending_calls() -> None:
    assert terminal("client_tool")["outcome"] == {
        "type": "success",
        "pendingToolCallIds": ["ui-1", "ui-2"],
    }
    assert terminal("client_tool", None)["result"] == {
        "status": "waiting_user",
        "reason": "client_tool",
        "pendingToolCallIds": ["ui-1", "ui-2"],
    }


def test_client_tool_without_list_derives_unanswered_calls() -> None:
    s = Stream().add("tool_call_start", id="a", name="f", arguments={})
    s.add("tool_call_start", id="b", name="g", arguments={})
    s.add("tool_call_result", id="a", name="f", success=True)
    s.add("completion", status="waiting_user", reason="client_tool")
    assert project(s.envelopes)[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["b"]}


@pytest.mark.parametrize("version", VERSIONS)
def test_budget_exhausted_finishes_and_says_so(version: str | None) -> None:
    event = terminal("budget", version)
    assert event["type"] == "RUN_FINISHED"
    assert "outcome" not in event
    assert event["result"] == {
        "status": "budget_exhausted",
        "reason": "max_rounds",
        "budget": {"kind": "rounds", "rounds": 32},
    }


def test_failed_is_run_error_with_the_loops_error_message() -> None:
    event = terminal("failed")
    assert event["type"] == "RUN_ERROR"
    assert event["message"] == "provider stream reset"
    assert event["code"] == "llm_stream_error"
    assert event["usage"][0]["inputTokens"] == 100
    assert "usage" not in terminal("failed", None)


def test_failed_without_error_event_uses_reason_or_a_default() -> None:
    only_reason = Stream().add("completion", status="failed", reason="max_tool_errors")
    assert project(only_reason.envelopes)[-1] == {
        "type": "RUN_ERROR",
        "message": "max_tool_errors",
        "code": "max_tool_errors",
        "timestamp": T0 // 1_000_000 + 1,
    }
    bare = project(Stream().add("completion", status="failed").envelopes)[-1]
    assert (bare["message"], bare["code"]) == ("run failed", "failed")


def test_unknown_terminal_status_finishes_with_it_in_result() -> None:
    event = terminal("unknown_status")
    assert event["type"] == "RUN_FINISHED"
    assert event["result"] == {"status": "paused_by_future_engine"}


def test_terminal_completion_is_also_kept_as_custom() -> None:
    events = project(STREAMS["completed"])
    assert events[-3]["name"] == "loopgate.completion"
    assert events[-3]["value"] == {"status": "completed", "reason": "stop"}


# -- after the end, and close ----------------------------------------------------------------


def test_feeds_after_terminal_return_nothing() -> None:
    p = AguiProjector(context())
    p.start()
    done = p.feed(Envelope("run-1", 1, T0, "completion", {"status": "completed"}))
    assert done[-1].__struct_config__.tag == "RUN_FINISHED"
    assert p.feed(Envelope("run-1", 2, T0, "content_delta", {"delta": "late"})) == []
    assert p.feed(Envelope("run-1", 3, T0, "whatever", {})) == []
    assert p.close("client went away") == []


def test_close_without_terminal_closes_everything_and_reports_truncation() -> None:
    events = project(STREAMS["truncated"], close_reason="producer disconnected")
    assert types(events)[-3:] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_ERROR"]
    assert events[-1]["message"] == "run ended without completion: producer disconnected"
    assert events[-1]["code"] == "truncated"
    assert events[-2]["timestamp"] == events[-4]["timestamp"]  # the last envelope's time
    assert project(STREAMS["truncated"])[-1]["message"] == (
        "run ended without completion: truncated"
    )


def test_close_twice_emits_one_error() -> None:
    p = AguiProjector(context())
    p.start()
    assert len(p.close()) == 1
    assert p.close() == []
    assert p.feed(Envelope("run-1", 1, T0, "content_delta", {"delta": "x"})) == []


def test_empty_stream_is_started_and_errored() -> None:
    assert types(project([])) == ["RUN_STARTED", "RUN_ERROR"]


# -- nothing lost, nothing raises ------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["llm_request", "llm_response", "hook_action", "steer", "soft_timeout", "error"]
)
def test_kinds_without_an_ag_ui_home_become_custom(kind: str) -> None:
    data = {"round": 1, "anything": {"nested": [1, None]}}
    custom = of_type(project(Stream().add(kind, data).envelopes), "CUSTOM")
    assert [(c["name"], c["value"]) for c in custom] == [(f"loopgate.{kind}", data)]


def test_unknown_kind_is_custom_and_keeps_the_payload_as_is() -> None:
    data = {"weird": [1, None, {"x": "y"}]}
    events = project(Stream().add("brand_new_kind", data).envelopes)
    assert events[1] == {
        "type": "CUSTOM",
        "name": "loopgate.brand_new_kind",
        "value": data,
        "timestamp": (T0 + 1_500_000) // 1_000_000,
    }


def test_malformed_known_fields_degrade_to_custom_without_raising() -> None:
    events = project(garbage().envelopes)
    assert_well_formed(events)
    names = [e["name"] for e in of_type(events, "CUSTOM")]
    assert names.count("loopgate.content_delta") == 2
    assert names.count("loopgate.reasoning_delta") == 1
    assert names.count("loopgate.tool_call_start") == 1  # no id
    assert names.count("loopgate.tool_call_result") == 2  # id not a string; second answer
    # the valid ones still map, unknown fields ignored; arguments of a foreign type (a list)
    # are the call's arguments all the same, as their JSON text (the call is shown, as by
    # every other projector)
    assert [e["toolCallId"] for e in of_type(events, "TOOL_CALL_START")] == ["ok", "s"]
    assert [e["delta"] for e in of_type(events, "TOOL_CALL_ARGS")] == [
        "[1,2]",
        '{"pre": "encoded"}',
    ]
    assert [e["content"] for e in of_type(events, "TOOL_CALL_RESULT")] == ["fine"]
    assert of_type(events, "TEXT_MESSAGE_CONTENT")[0]["delta"] == "still streaming"
    assert "usage" not in events[-1]  # garbage counts are not usage


@pytest.mark.parametrize("kind", ["content_delta", "reasoning_delta"])
def test_malformed_delta_inside_an_open_segment_is_custom_and_the_segment_goes_on(
    kind: str,
) -> None:
    p = AguiProjector(context())
    p.start()
    p.feed(Envelope("run-1", 1, T0, kind, {"delta": "ok"}))
    for seq, data in enumerate([{"delta": 5}, {}, None, {"delta": None}], start=2):
        out = [msgspec.to_builtins(m) for m in p.feed(Envelope("run-1", seq, T0, kind, data))]  # type: ignore[arg-type]
        assert [(e["type"], e["name"]) for e in out] == [("CUSTOM", f"loopgate.{kind}")]
    tail = [msgspec.to_builtins(m) for m in p.feed(Envelope("run-1", 9, T0, kind, {"delta": "!"}))]
    assert [e["type"] for e in tail] == [tail[0]["type"]]
    assert tail[0]["type"].endswith("MESSAGE_CONTENT") and tail[0]["delta"] == "!"


def test_non_dict_payload_does_not_raise() -> None:
    p = AguiProjector(context())
    p.start()
    for kind in ("content_delta", "completion", "llm_response", "tool_call_start", "x"):
        out = p.feed(Envelope("run-1", 1, T0, kind, None))  # type: ignore[arg-type]
        assert [msgspec.to_builtins(m)["type"] for m in out][-1] == "CUSTOM"


def test_projector_does_not_mutate_payloads() -> None:
    s = tool_rounds({"status": "completed"})
    before = msgspec.json.encode(s.envelopes)
    project(s.envelopes)
    assert msgspec.json.encode(s.envelopes) == before


# -- adapter and encoder ---------------------------------------------------------------------


def test_adapter_satisfies_the_contract() -> None:
    adapter: Adapter = AguiAdapter()
    assert adapter.name == "agui"
    assert isinstance(adapter.projector(context()), AguiProjector)
    assert MEDIA_TYPE == "text/event-stream"


def test_render_is_lf_only_sse_one_data_line_per_event() -> None:
    adapter = AguiAdapter()
    p = adapter.projector(context())
    messages = p.start()
    s = Stream().add("content_delta", delta="line one\nline two\r\n\u2028end")
    for env in s.envelopes:
        messages += p.feed(env)
    messages += p.close()
    wire = adapter.render(messages)
    assert b"\r" not in wire
    frames = wire.split(b"\n\n")
    assert frames[-1] == b""
    assert len(frames) - 1 == len(messages)
    for frame, message in zip(frames, messages, strict=False):
        assert frame.startswith(b"data: ") and b"\n" not in frame
        assert json.loads(frame[6:]) == adapter.to_builtins(message)
    assert adapter.render([]) == b""
    assert adapter.render_json(messages[0]) == wire.split(b"\n\n")[0][6:]


def test_interrupt_ids_parse_back_to_what_minted_them() -> None:
    from loopgate.adapters.agui.interrupts import InterruptRef, interrupt_id, parse_interrupt_id

    run = "run:with:colons"
    assert parse_interrupt_id(interrupt_id(run, "interrupt", 7)) == InterruptRef(
        run, "interrupt", "7"
    )
    assert parse_interrupt_id(interrupt_id(run, "interrupt", 7, 0)) == InterruptRef(
        run, "interrupt", "7", 0
    )
    assert parse_interrupt_id(interrupt_id(run, "interrupt", 7, 1)) == InterruptRef(
        run, "interrupt", "7", 1
    )
    assert parse_interrupt_id(interrupt_id(run, "permission", "req:1")) == InterruptRef(
        run, "permission", "req:1"
    )
    for foreign in ("nope", f"{run}:interrupt:x", f"{run}:interrupt:7:y", ":interrupt:7"):
        assert parse_interrupt_id(foreign) is None
