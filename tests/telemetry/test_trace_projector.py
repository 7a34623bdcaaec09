"""The sans-IO trace projector: goldens per recorded stream, content capture, odd input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.otel import (
    EXPECTED,
    STREAMS,
    golden_path,
    load_stream,
    project,
    render_golden,
    stream_context,
    tree_from_records,
)
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.messages import Message
from loopgate.gateway.telemetry.projector import TraceProjector
from loopgate.gateway.telemetry.records import SpanEnd, SpanEvent, SpanStart, TraceContext

STREAM_PATHS = sorted(STREAMS.glob("*.jsonl"))
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "loopgate.content",
}


def ctx(**kw: Any) -> TraceContext:
    return TraceContext(
        **{"run_id": "r", "thread_id": "t", "source": "ingest", "created_at": 1000, **kw}
    )


def envs(*events: tuple[str, dict[str, Any]], start: int = 2000) -> list[Envelope]:
    return [Envelope("r", i, start + i * 100, k, d) for i, (k, d) in enumerate(events, 1)]


def walk(tree: dict[str, Any]) -> list[dict[str, Any]]:
    out = [tree]
    for child in tree["children"]:
        out.extend(walk(child))
    return out


def attribute_keys(tree: dict[str, Any]) -> set[str]:
    keys: set[str] = set()
    for node in walk(tree):
        keys.update(node["attributes"])
        for event in node["events"]:
            keys.update(event["attributes"])
    return keys


@pytest.mark.parametrize("stream", STREAM_PATHS, ids=lambda p: p.stem)
def test_golden_span_tree(stream: Path) -> None:
    expected = golden_path(stream)
    assert expected.exists(), "regenerate with: python -m conformance.otel --write"
    assert render_golden(stream) == expected.read_bytes(), (
        "span tree changed; if intended: python -m conformance.otel --write"
    )


def test_every_golden_has_a_stream() -> None:
    assert {p.stem for p in EXPECTED.glob("*.json")} == {p.stem for p in STREAM_PATHS}


@pytest.mark.parametrize("stream", STREAM_PATHS, ids=lambda p: p.stem)
def test_stream_shape(stream: Path) -> None:
    """What every golden must say, independent of its bytes: one model span per llm_request,
    one tool span per tool call, all children of the run, all closed inside the run."""
    envelopes = load_stream(stream)
    tree = tree_from_records(project(envelopes, stream_context(envelopes, stream.stem)))
    assert tree["name"] == "invoke_agent loopgate"
    assert tree["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert tree["attributes"]["gen_ai.conversation.id"] == stream.stem
    kinds = [e.kind for e in envelopes]
    chats = [c for c in tree["children"] if c["name"].startswith("chat")]
    tools = [c for c in tree["children"] if c["name"].startswith("execute_tool")]
    assert len(chats) == kinds.count("llm_request")
    # A call is a start with a string id and name (the projector base's rule; AG-UI shows
    # any other start as CUSTOM).
    started = [e.data for e in envelopes if e.kind == "tool_call_start"]
    assert len(tools) == len({d["id"] for d in started if isinstance(d.get("id"), str)})
    requested: list[str | None] = []
    named = None

    def model_of(data: dict[str, Any]) -> str | None:  # a model of a foreign type is no model
        model = data.get("model")
        return model if isinstance(model, str) and model else None

    for e in envelopes:
        # A request's model is the newest a stage or request named.
        if e.kind in ("stage_start", "llm_request"):
            named = model_of(e.data) or named
        if e.kind == "llm_request":
            requested.append(named)
    for chat, model in zip(chats, requested, strict=True):
        assert chat["kind"] == "client"
        assert chat["attributes"].get("gen_ai.request.model") == model
        assert chat["name"] == (f"chat {model}" if model else "chat")
    for node in walk(tree):
        assert node["end"] is not None and 0 <= node["start"] <= node["end"] <= tree["end"]
        assert not CONTENT_KEYS & set(node["attributes"]), "content must be off by default"
    status = tree["attributes"]["loopgate.run.status"]
    assert (tree["status"]["code"] == "error") == (status == "failed")


def test_model_request_attributes_and_time_to_first_chunk() -> None:
    p = TraceProjector(ctx(provider_name="openai"))
    p.start()
    records = [
        r
        for e in envs(
            ("stage_start", {"model": "gpt-x"}),
            ("llm_request", {"round": 1, "attempt": 1}),
            ("reasoning_delta", {"delta": "hmm"}),
            ("content_delta", {"delta": "hi"}),
            (
                "llm_response",
                {
                    "round": 1,
                    "attempt": 1,
                    "model": "gpt-x-2025",
                    "finishReason": "stop",
                    "promptTokens": 7,
                    "completionTokens": 3,
                    "reasoningTokens": 2,
                },
            ),
            ("completion", {"status": "completed", "reason": "stop"}),
        )
        for r in p.feed(e)
    ]
    start = next(r for r in records if isinstance(r, SpanStart))
    assert (start.name, start.kind, start.parent) == ("chat gpt-x", "client", "run")
    assert start.attributes["gen_ai.provider.name"] == "openai"
    assert start.attributes["gen_ai.request.model"] == "gpt-x"
    end = next(r for r in records if isinstance(r, SpanEnd) and r.key == start.key)
    assert end.error is None
    assert end.attributes == {
        "gen_ai.response.model": "gpt-x-2025",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.reasoning.output_tokens": 2,
        # request at ts 2200, first delta at 2300: 100 ns.
        "gen_ai.response.time_to_first_chunk": 100 / 1e9,
    }
    run_end = records[-1]
    assert isinstance(run_end, SpanEnd) and run_end.key == "run"
    assert run_end.attributes["gen_ai.usage.input_tokens"] == 7
    assert run_end.end_ns == 2600


def test_failed_model_request_and_failed_run_are_errors() -> None:
    p = TraceProjector(ctx())
    p.start()
    records = [
        r
        for e in envs(
            ("llm_request", {"round": 1}),
            ("llm_response", {"round": 1, "error": "upstream 502", "errorType": "http_502"}),
            ("error", {"message": "upstream 502", "phase": "llm_stream"}),
            ("completion", {"status": "failed", "reason": "provider_error"}),
        )
        for r in p.feed(e)
    ]
    chat_end = records[1]
    assert isinstance(chat_end, SpanEnd)
    assert chat_end.error == "upstream 502"
    assert chat_end.attributes["error.type"] == "http_502"
    event = records[2]
    assert isinstance(event, SpanEvent) and event.name == "error" and event.key == "run"
    assert event.attributes == {"loopgate.message": "upstream 502", "loopgate.phase": "llm_stream"}
    run_end = records[-1]
    assert isinstance(run_end, SpanEnd)
    assert run_end.error == "upstream 502"
    assert run_end.attributes["error.type"] == "provider_error"


def test_tool_spans_failures_and_pending_tools() -> None:
    p = TraceProjector(ctx())
    p.start()
    records = [
        r
        for e in envs(
            ("tool_call_start", {"id": "a", "name": "read_file", "arguments": {"path": "x"}}),
            ("tool_call_start", {"id": "b", "name": "boom"}),
            ("tool_call_start", {"id": "c", "name": "ask_user"}),
            ("tool_call_result", {"id": "a", "name": "read_file", "success": False, "error": "no"}),
            ("tool_error", {"id": "b", "name": "boom", "error": "raised"}),
            ("completion", {"status": "waiting_user", "reason": "ask_user"}),
        )
        for r in p.feed(e)
    ]
    ends = {r.key: r for r in records if isinstance(r, SpanEnd)}
    assert ends["tool.a"].attributes == {"error.type": "tool_failed"}
    assert ends["tool.a"].error == "no"
    assert ends["tool.b"].attributes == {"error.type": "tool_error"}
    assert ends["tool.c"].error is None
    assert ends["tool.c"].attributes == {"loopgate.tool.pending": True}
    assert ends["run"].error is None  # waiting for the user is not a failure
    starts = [r for r in records if isinstance(r, SpanStart)]
    assert [s.name for s in starts] == [
        "execute_tool read_file",
        "execute_tool boom",
        "execute_tool ask_user",
    ]
    assert starts[0].attributes["gen_ai.tool.type"] == "function"
    assert "gen_ai.tool.call.arguments" not in starts[0].attributes


def test_content_capture_when_switched_on_and_clipped() -> None:
    p = TraceProjector(
        ctx(input=(Message(role="user", content="what is 2+2?" + "!" * 50),)),
        content=True,
        max_content_chars=40,
    )
    records = list(p.start())
    for e in envs(
        ("llm_request", {"round": 1, "model": "m"}),
        ("reasoning_delta", {"delta": "think"}),
        ("content_delta", {"delta": "four"}),
        ("llm_response", {"round": 1, "finishReason": "stop"}),
        ("tool_call_start", {"id": "a", "name": "calc", "arguments": {"expr": "2+2"}}),
        ("tool_call_result", {"id": "a", "name": "calc", "success": True, "result": "x" * 100}),
        ("steer", {"content": "be brief", "round": 2}),
        ("completion", {"status": "completed"}),
    ):
        records.extend(p.feed(e))
    attrs: dict[str, Any] = {}
    for r in records:
        if not isinstance(r, SpanEvent):
            attrs.update(r.attributes)
        else:
            attrs.update(r.attributes)
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is 2+2?" + "!" * 28 + "…"}]}
    ]
    assert json.loads(attrs["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "think"},
                {"type": "text", "content": "four"},
            ],
            "finish_reason": "stop",
        }
    ]
    assert json.loads(attrs["gen_ai.tool.call.arguments"]) == {"expr": "2+2"}
    assert attrs["gen_ai.tool.call.result"] == "x" * 40 + "…"
    assert attrs["loopgate.content"] == "be brief"


def test_content_off_keeps_steering_text_out() -> None:
    p = TraceProjector(ctx(input=(Message(role="user", content="secret"),)))
    records = list(p.start())
    records += p.feed(Envelope("r", 1, 5, "steer", {"content": "secret steer", "round": 1}))
    assert "secret" not in repr(records)


def test_approval_spans_nest_under_their_tool() -> None:
    p = TraceProjector(ctx())
    p.start()
    call = {"id": "w", "name": "write_note", "arguments": {}}
    records = [
        r
        for e in envs(
            ("tool_call_start", call),
            ("permission_request", {"requestId": "perm_1", "toolCall": call}),
            (
                "permission_result",
                {
                    "requestId": "perm_1",
                    "toolCallId": "w",
                    "decision": "allow_always",
                    "by": "client",
                },
            ),
            ("tool_call_result", {"id": "w", "name": "write_note", "success": True}),
            ("tool_call_start", {**call, "id": "w2"}),
            (
                "permission_result",
                {
                    "requestId": "perm_2",
                    "toolCallId": "w2",
                    "decision": "allow_always",
                    "by": "remembered",
                },
            ),
            ("completion", {"status": "completed"}),
        )
        for r in p.feed(e)
    ]
    approval = next(r for r in records if isinstance(r, SpanStart) and r.key == "approval.perm_1")
    assert approval.parent == "tool.w"
    assert approval.name == "await_approval write_note"
    end = next(r for r in records if isinstance(r, SpanEnd) and r.key == "approval.perm_1")
    assert end.attributes == {
        "loopgate.permission.decision": "allow_always",
        "loopgate.permission.by": "client",
    }
    remembered = next(r for r in records if isinstance(r, SpanEvent))
    assert remembered.key == "tool.w2" and remembered.name == "permission_result"


def test_ingested_streams_with_halves_missing() -> None:
    """An external loop may report responses without requests, results without starts."""
    p = TraceProjector(ctx())
    p.start()
    records = [
        r
        for e in envs(
            ("llm_response", {"round": 1, "finishReason": "stop"}),
            ("tool_call_result", {"id": "z", "name": "t", "success": True}),
            ("llm_request", {"round": 2}),
            ("llm_request", {"round": 2, "attempt": 2}),
            ("completion", {"status": "cancelled"}),
        )
        for r in p.feed(e)
    ]
    tree = tree_from_records([*TraceProjector(ctx()).start(), *records])
    names = [(c["name"], c["start"], c["end"], c["status"]["code"]) for c in tree["children"]]
    assert names == [
        ("chat", 1100, 1100, "unset"),
        ("execute_tool t", 1200, 1200, "unset"),
        ("chat", 1300, 1400, "error"),  # superseded by a new request
        ("chat", 1400, 1500, "error"),  # open when the run was cancelled
    ]
    assert tree["status"]["code"] == "unset"


def test_calls_are_the_projector_bases() -> None:
    """What is a tool call, an answer, the model and the last error is the base's say, as for
    every wire adapter: a second answer opens no second span, a start whose id is no string is
    no call, an empty error message hides no earlier one, and a request that names no model
    is the newest named one's."""
    p = TraceProjector(ctx())
    records = list(p.start())
    for e in envs(
        ("tool_call_start", {"id": "a", "name": "t"}),
        ("tool_call_result", {"id": "a", "name": "t", "success": True}),
        ("tool_call_result", {"id": "a", "name": "t", "success": True}),
        ("tool_call_start", {"id": 7, "name": "t"}),
        ("llm_request", {"round": 1, "model": "m1"}),
        ("llm_response", {"round": 1, "error": "upstream 502"}),
        ("error", {"message": ""}),
        ("llm_request", {"round": 2}),
        ("completion", {"status": "failed", "reason": "provider_error"}),
    ):
        records.extend(p.feed(e))
    tree = tree_from_records(records)
    assert [c["name"] for c in tree["children"]] == ["execute_tool t", "chat m1", "chat m1"]
    assert tree["attributes"]["loopgate.run.tool_calls"] == 1
    assert tree["status"] == {"code": "error", "description": "upstream 502"}


def test_open_span_limit_and_duplicates() -> None:
    p = TraceProjector(ctx(), max_open_spans=2)
    p.start()
    starts = []
    for i, e in enumerate(
        envs(*[("tool_call_start", {"id": str(i % 3), "name": "t"}) for i in range(6)])
    ):
        starts += [r for r in p.feed(e) if isinstance(r, SpanStart)]
        assert i < 6
    assert [s.key for s in starts] == ["tool.0", "tool.1"]
    end = p.feed(Envelope("r", 9, 9000, "completion", {"status": "completed"}))[-1]
    assert isinstance(end, SpanEnd) and end.attributes["loopgate.spans.dropped"] == 2


def test_events_after_the_end_and_close_are_ignored() -> None:
    p = TraceProjector(ctx())
    p.start()
    assert p.feed(Envelope("r", 1, 5, "completion", {"status": "completed"}))
    assert p.feed(Envelope("r", 2, 6, "llm_request", {"round": 1})) == []
    assert p.close() == []
    q = TraceProjector(ctx())
    q.start()
    q.feed(Envelope("r", 1, 5, "tool_call_start", {"id": "a", "name": "t"}))
    closing = q.close()
    assert [(r.key, r.error is not None) for r in closing if isinstance(r, SpanEnd)] == [
        ("tool.a", True),
        ("run", True),
    ]


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
KINDS = st.sampled_from(
    [
        "stage_start",
        "llm_request",
        "llm_response",
        "content_delta",
        "tool_call_start",
        "tool_call_result",
        "tool_error",
        "permission_request",
        "permission_result",
        "error",
        "hook_action",
        "completion",
        "x_unknown",
    ]
)
FIELDS = st.sampled_from(
    [
        "id",
        "name",
        "model",
        "error",
        "success",
        "status",
        "requestId",
        "toolCall",
        "delta",
        "promptTokens",
        "finishReason",
        "round",
        "content",
    ]
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(KINDS, st.dictionaries(FIELDS, JSONISH, max_size=5)), max_size=30),
    st.booleans(),
)
def test_any_input_yields_a_well_formed_tree(
    events: list[tuple[str, dict[str, Any]]], content: bool
) -> None:
    p = TraceProjector(ctx(), content=content)
    records = list(p.start())
    for e in envs(*events):
        records.extend(p.feed(e))
    records.extend(p.close())
    tree = tree_from_records(records)
    for node in walk(tree):
        assert node["end"] is not None, f"{node['name']} never ended"


def test_the_cost_of_each_response_and_of_the_run() -> None:
    # costUsd from the operator's price table (issue 36): on each chat span, summed on the run.
    p = TraceProjector(ctx())
    p.start()
    records = [
        r
        for e in envs(
            ("llm_request", {"round": 1}),
            ("llm_response", {"round": 1, "promptTokens": 10, "costUsd": 0.25}),
            ("llm_request", {"round": 2}),
            ("llm_response", {"round": 2, "promptTokens": 10, "costUsd": 0.5}),
            ("llm_request", {"round": 3}),
            ("llm_response", {"round": 3, "costUsd": "free"}),  # not a number: left out
            ("completion", {"status": "completed", "costUsd": 0.75}),
        )
        for r in p.feed(e)
    ]
    chats = [r for r in records if isinstance(r, SpanEnd) and r.key != "run"]
    assert [c.attributes.get("loopgate.usage.cost_usd") for c in chats] == [0.25, 0.5, None]
    run_end = records[-1]
    assert isinstance(run_end, SpanEnd) and run_end.key == "run"
    assert run_end.attributes["loopgate.usage.cost_usd"] == 0.75
