"""The Vercel projector: goldens byte for byte, the chunk shapes every golden line keeps, and
the cases no recording has (fed by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.runner import (
    EXPECTED,
    golden_path,
    load_stream,
    regenerate_command,
    render_golden,
    stream_paths,
)
from loopgate.adapters.vercel import VercelAdapter
from loopgate.adapters.vercel.projector import CLIENT_TOOLS, MESSAGE_ID
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import ProjectorContext, as_served, project_run
from tests.gateway.harness import REPO

TARGET = "vercel"
HOW = f"regenerate (after reviewing the change) with: cd {REPO} && {regenerate_command(TARGET)}"
ADAPTER = VercelAdapter()
T0 = 1_800_000_000_000_000_000
# What each chunk type carries besides ``type``, as the ai package's uiMessageChunkSchema has
# it (required, optional); tests/vercel/test_node_client.py runs the package's own schema.
SHAPES: dict[str, tuple[set[str], set[str]]] = {
    "start": (set(), {"messageId", "messageMetadata"}),
    "start-step": (set(), set()),
    "finish-step": (set(), set()),
    "text-start": ({"id"}, set()),
    "text-delta": ({"id", "delta"}, set()),
    "text-end": ({"id"}, set()),
    "reasoning-start": ({"id"}, set()),
    "reasoning-delta": ({"id", "delta"}, set()),
    "reasoning-end": ({"id"}, set()),
    "tool-input-start": ({"toolCallId", "toolName"}, {"providerExecuted"}),
    "tool-input-delta": ({"toolCallId", "inputTextDelta"}, set()),
    "tool-input-available": ({"toolCallId", "toolName", "input"}, {"providerExecuted"}),
    "tool-output-available": ({"toolCallId", "output"}, {"providerExecuted"}),
    "tool-output-error": ({"toolCallId", "errorText"}, {"providerExecuted"}),
    "steering-message": ({"id", "parts"}, set()),
    "error": ({"errorText"}, set()),
    "message-metadata": ({"messageMetadata"}, set()),
    "finish": (set(), {"finishReason", "messageMetadata"}),
    "abort": (set(), {"reason"}),
}
FINISH_REASONS = {"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}


def project(
    events: list[tuple[str, dict[str, Any]]],
    options: dict[str, Any] | None = None,
    *,
    close: str | None = None,
    run_id: str = "r1",
) -> list[Any]:
    envelopes = [
        Envelope(run_id, seq, T0 + seq * 1_000_000, kind, data)
        for seq, (kind, data) in enumerate(events, start=1)
    ]
    context = ProjectorContext(run_id=run_id, thread_id="chat-1", options=options or {})
    projector = ADAPTER.projector(context)
    out = projector.start()
    for envelope in envelopes:
        out += projector.feed(envelope)
    return [ADAPTER.to_builtins(m) for m in out + projector.close(close)]


def types(chunks: list[Any]) -> list[str]:
    return [c if isinstance(c, str) else c["type"] for c in chunks]


def golden(stream: Path) -> list[Any]:
    return [json.loads(line) for line in golden_path(TARGET, stream).read_bytes().splitlines()]


# --- goldens -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_golden_matches(stream: Path) -> None:
    path = golden_path(TARGET, stream)
    assert path.exists(), f"no golden {path.relative_to(REPO)}; {HOW}"
    expected = path.read_bytes().splitlines()
    actual = render_golden(TARGET, stream).splitlines()
    for number, (want, got) in enumerate(zip(expected, actual, strict=False), start=1):
        assert got == want, f"{path.name}:{number} differs\n want {want!r}\n  got {got!r}\n{HOW}"
    assert len(actual) == len(expected), f"{path.name}: line count differs; {HOW}"


def test_no_stale_goldens() -> None:
    streams = {p.stem for p in stream_paths()}
    stale = [p.name for p in (EXPECTED / TARGET).glob("*.jsonl") if p.stem not in streams]
    assert not stale, f"goldens without a stream: {stale}; {HOW}"


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_every_golden_is_a_well_formed_message(stream: Path) -> None:
    """The schema's fields, parts opened before they are used and closed before the end, one
    start and one end, ``[DONE]`` last."""
    chunks = golden(stream)
    assert chunks[0]["type"] == "start" and chunks[-1] == "[DONE]"
    assert "[DONE]" not in chunks[:-1]
    open_parts: set[str] = set()
    steps = 0
    ends = [c["type"] for c in chunks[:-1] if c["type"] in ("finish", "abort")]
    assert len(ends) == 1, ends
    for chunk in chunks[:-1]:
        kind = chunk["type"]
        if kind.startswith("data-"):
            assert kind.startswith("data-loopgate-") and set(chunk) <= {
                "type",
                "id",
                "data",
                "transient",
            }
            continue
        required, optional = SHAPES[kind]
        assert required <= set(chunk) - {"type"} <= required | optional, chunk
        if kind in ("text-start", "reasoning-start"):
            open_parts.add(chunk["id"])
        elif kind in ("text-delta", "reasoning-delta"):
            assert chunk["id"] in open_parts
        elif kind in ("text-end", "reasoning-end"):
            open_parts.remove(chunk["id"])
        elif kind == "start-step":
            steps += 1
        elif kind == "finish-step":
            steps -= 1
        elif kind == "finish":
            assert chunk.get("finishReason", "stop") in FINISH_REASONS
        assert steps in (0, 1)
    assert not open_parts and steps == 0


def test_every_tool_call_is_announced_before_its_output() -> None:
    for stream in stream_paths():
        announced: set[str] = set()
        for chunk in golden(stream)[:-1]:
            if chunk["type"] == "tool-input-available":
                announced.add(chunk["toolCallId"])
            elif chunk["type"] in ("tool-output-available", "tool-output-error"):
                assert chunk["toolCallId"] in announced, (stream.name, chunk)


def test_unknown_kinds_and_fields_pass_as_data_parts() -> None:
    chunks = golden(EXPECTED.parent / "streams" / "unknown-kinds-fields.jsonl")
    data: dict[str, Any] = {}
    for chunk in chunks:
        if isinstance(chunk, dict) and chunk["type"].startswith("data-"):
            data.setdefault(chunk["type"], chunk)  # the first of each kind
    for kind in ("x_memory_recall", "vendor.progress", "tool_progress", "x_audit"):
        part = data[f"data-loopgate-{kind}"]
        assert "transient" not in part  # kept in the message, where the app renders it
    assert data["data-loopgate-x_memory_recall"]["data"]["items"] == [{"id": "m1", "score": 0.82}]
    # Unknown fields of known kinds stay in the data the client gets.
    assert data["data-loopgate-stage_start"]["data"]["engine"] == "other/2.1"
    assert data["data-loopgate-stage_start"]["transient"] is True


def test_foreign_payloads_degrade_to_data_parts() -> None:
    chunks = golden(EXPECTED.parent / "streams" / "tolerant-payloads.jsonl")
    kinds = [c["type"] for c in chunks if isinstance(c, dict)]
    # A delta that is not text, a call whose id is not a string, a steer that is not text.
    assert "data-loopgate-content_delta" in kinds and "data-loopgate-reasoning_delta" in kinds
    assert "data-loopgate-tool_call_start" in kinds and "data-loopgate-steer" in kinds
    calls = {c["toolCallId"]: c for c in chunks if c != "[DONE]" and c["type"].startswith("tool-")}
    assert {c["toolCallId"] for c in calls.values()} == {"call_t1", "call_t3"}
    finish = next(c for c in chunks if c != "[DONE]" and c["type"] == "finish")
    assert finish["finishReason"] == "other"  # halted_by_policy: a status newer than this code


def test_goldens_are_loopgate_replay_output_of_the_registered_adapter() -> None:
    stream = EXPECTED.parent / "streams" / "one-tool-round.jsonl"
    messages = project_run(ADAPTER, as_served(load_stream(stream)))
    assert [ADAPTER.to_builtins(m) for m in messages] == golden(stream)


# --- by hand -----------------------------------------------------------------------------


def test_a_run_is_one_message_with_a_step_per_round() -> None:
    chunks = project(
        [
            ("stage_start", {"round": 1, "model": "m"}),
            ("reasoning_delta", {"delta": "hm"}),
            ("content_delta", {"delta": "Let me "}),
            ("content_delta", {"delta": "look."}),
            ("llm_response", {"round": 1, "promptTokens": 5, "completionTokens": 3}),
            ("tool_call_start", {"id": "c1", "name": "clock", "arguments": {}}),
            (
                "tool_call_result",
                {"id": "c1", "name": "clock", "success": True, "result": {"t": 1}},
            ),
            ("completion", {"status": "executing"}),
            ("stage_start", {"round": 2}),
            ("content_delta", {"delta": "It is 1."}),
            ("completion", {"status": "completed", "reason": "stop"}),
        ]
    )
    assert types(chunks) == [
        "start",
        "start-step",
        "data-loopgate-stage_start",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "data-loopgate-llm_response",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
        "data-loopgate-completion",
        "finish-step",
        "start-step",
        "data-loopgate-stage_start",
        "text-start",
        "text-delta",
        "text-end",
        "data-loopgate-completion",
        "finish-step",
        "finish",
        "[DONE]",
    ]
    assert chunks[0] == {
        "type": "start",
        "messageId": "r1",
        "messageMetadata": {"loopgate": {"runId": "r1", "threadId": "chat-1"}},
    }
    assert chunks[13] == {
        "type": "tool-input-available",
        "toolCallId": "c1",
        "toolName": "clock",
        "input": {},
    }
    assert chunks[14]["output"] == {"t": 1}  # the whole result, as JSON
    assert chunks[-2] == {
        "type": "finish",
        "finishReason": "stop",
        "messageMetadata": {
            "loopgate": {
                "status": "completed",
                "reason": "stop",
                "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8},
            }
        },
    }


def test_the_message_id_is_the_continued_message() -> None:
    chunks = project([("completion", {"status": "completed"})], {MESSAGE_ID: "msg-7"})
    assert chunks[0]["messageId"] == "msg-7"


def test_an_orphan_result_is_announced_first() -> None:
    chunks = project(
        [
            (
                "tool_call_result",
                {"id": "c9", "name": "lookup", "success": True, "resultPreview": "3"},
            )
        ]
    )
    assert types(chunks)[1:6] == [
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
    ]
    assert chunks[4]["input"] == {} and chunks[5]["output"] == "3"


def test_a_failed_call_is_an_output_error() -> None:
    chunks = project(
        [
            ("tool_call_start", {"id": "c1", "name": "read_file", "arguments": {"path": "x"}}),
            ("tool_error", {"id": "c1", "name": "read_file", "error": "no such file: x"}),
        ]
    )
    error = next(c for c in chunks if c != "[DONE]" and c["type"] == "tool-output-error")
    assert error == {
        "type": "tool-output-error",
        "toolCallId": "c1",
        "errorText": "no such file: x",
        "providerExecuted": True,
    }


def test_arguments_sent_as_text_are_decoded_for_the_input() -> None:
    chunks = project(
        [
            ("tool_call_start", {"id": "c1", "name": "f", "arguments": '{"a": 1}'}),
            ("tool_call_start", {"id": "c2", "name": "g", "arguments": "not json"}),
        ]
    )
    inputs = {c["toolCallId"]: c for c in chunks if c != "[DONE]" and "input" in c}
    deltas = {c["toolCallId"]: c for c in chunks if c != "[DONE]" and "inputTextDelta" in c}
    assert inputs["c1"]["input"] == {"a": 1} and deltas["c1"]["inputTextDelta"] == '{"a": 1}'
    assert inputs["c2"]["input"] == "not json" and deltas["c2"]["inputTextDelta"] == "not json"


def test_a_steer_is_a_steering_message_between_the_steps() -> None:
    chunks = project(
        [
            ("stage_start", {"round": 1}),
            ("completion", {"status": "executing"}),
            ("steer", {"content": "shorter, please", "round": 2}),
            ("stage_start", {"round": 2}),
            ("completion", {"status": "completed"}),
        ]
    )
    at = types(chunks).index("steering-message")
    assert types(chunks)[at - 1 : at + 2] == ["finish-step", "steering-message", "start-step"]
    assert chunks[at] == {
        "type": "steering-message",
        "id": "r1:steer:3",
        "parts": [{"type": "text", "text": "shorter, please"}],
    }


def test_a_failed_run_ends_with_error_then_finish() -> None:
    chunks = project(
        [
            ("content_delta", {"delta": "Let me"}),
            ("error", {"message": "the model lost its connection"}),
            ("completion", {"status": "failed", "reason": "provider_error"}),
        ]
    )
    # A mid-run error is a data part: the client's Chat stops at an ``error`` chunk.
    assert "data-loopgate-error" in types(chunks)
    assert types(chunks)[-6:] == [
        "text-end",
        "data-loopgate-completion",
        "finish-step",
        "error",
        "finish",
        "[DONE]",
    ]
    assert chunks[-3] == {"type": "error", "errorText": "the model lost its connection"}
    assert chunks[-2]["finishReason"] == "error"
    assert chunks[-2]["messageMetadata"]["loopgate"]["reason"] == "provider_error"


def test_a_cancelled_run_ends_with_abort_and_closes_its_calls() -> None:
    chunks = project(
        [
            ("tool_call_start", {"id": "c1", "name": "sleep", "arguments": {"seconds": 30}}),
            ("completion", {"status": "cancelled", "reason": "cancelled"}),
        ]
    )
    assert types(chunks)[-6:] == [
        "data-loopgate-completion",
        "tool-output-error",
        "finish-step",
        "message-metadata",
        "abort",
        "[DONE]",
    ]
    assert "finish" not in types(chunks)  # as the AI SDK's own server ends an aborted stream
    assert chunks[-5]["errorText"] == "the run ended before this tool call finished (cancelled)"
    assert chunks[-5]["providerExecuted"] is True  # the gateway's answer: nothing to send back
    assert chunks[-2] == {"type": "abort", "reason": "cancelled"}


def test_a_client_tool_stays_for_the_client() -> None:
    chunks = project(
        [
            ("tool_call_start", {"id": "ui-1", "name": "pick_color", "arguments": {}}),
            ("completion", {"status": "waiting_user", "reason": "client_tool"}),
        ]
    )
    assert "tool-output-error" not in types(chunks) and "tool-output-available" not in types(chunks)
    assert chunks[-2]["finishReason"] == "tool-calls"


ROUND_WITH_BOTH = [
    ("tool_call_start", {"id": "c1", "name": "clock", "arguments": {}}),
    ("tool_call_start", {"id": "ui-1", "name": "pick_color", "arguments": {}}),
    ("tool_call_result", {"id": "c1", "name": "clock", "success": True, "resultPreview": "noon"}),
    ("completion", {"status": "waiting_user", "reason": "client_tool"}),
]


def marks(chunks: list[Any], call_id: str) -> dict[str, Any]:
    """``providerExecuted`` of each chunk of one call, by chunk type (None: absent)."""
    return {
        c["type"]: c.get("providerExecuted")
        for c in chunks
        if c != "[DONE]" and c.get("toolCallId") == call_id
    }


def test_the_loops_calls_say_so_and_the_clients_do_not() -> None:
    chunks = project(ROUND_WITH_BOTH, {CLIENT_TOOLS: ["pick_color"]})
    assert marks(chunks, "c1") == {
        "tool-input-start": True,
        "tool-input-delta": None,  # the schema has no place for it there
        "tool-input-available": True,
        "tool-output-available": True,
    }
    assert marks(chunks, "ui-1") == {
        "tool-input-start": None,
        "tool-input-delta": None,
        "tool-input-available": None,
    }


def test_without_the_clients_tools_a_result_still_marks_its_call() -> None:
    # A replay or another front end's run: which tools the client runs is not known, so every
    # call may be the client's until the loop answers it.
    chunks = project(ROUND_WITH_BOTH)
    assert marks(chunks, "c1") == {
        "tool-input-start": None,
        "tool-input-delta": None,
        "tool-input-available": None,
        "tool-output-available": True,
    }
    assert set(marks(chunks, "ui-1").values()) == {None}


def test_a_question_names_the_call_it_waits_on() -> None:
    chunks = project(
        [
            ("tool_call_start", {"id": "c1", "name": "ask_user", "arguments": {"question": "A?"}}),
            ("tool_call_result", {"id": "c1", "name": "ask_user", "success": True}),
            ("completion", {"status": "waiting_user", "reason": "ask_user", "toolCallId": "c1"}),
        ],
        {CLIENT_TOOLS: []},
    )
    assert set(marks(chunks, "c1").values()) == {True, None}  # None: the delta's
    assert chunks[-2]["messageMetadata"]["loopgate"]["waiting"] == ["c1"]
    client = project(ROUND_WITH_BOTH, {CLIENT_TOOLS: ["pick_color"]})
    assert "waiting" not in client[-2]["messageMetadata"]["loopgate"]  # the client's to answer


def test_a_question_is_said_when_the_round_said_nothing() -> None:
    question = "Which option, A or B?"
    chunks = project(
        [
            (
                "tool_call_start",
                {"id": "c1", "name": "ask_user", "arguments": {"question": question}},
            ),
            ("tool_call_result", {"id": "c1", "name": "ask_user", "success": True}),
            ("completion", {"status": "waiting_user", "reason": "ask_user", "toolCallId": "c1"}),
        ]
    )
    said = [c["delta"] for c in chunks if c != "[DONE]" and c["type"] == "text-delta"]
    assert said == [question] and chunks[-2]["finishReason"] == "stop"


@pytest.mark.parametrize(
    ("status", "extra", "reason"),
    [
        ("completed", {"finishReason": "length"}, "length"),
        ("completed", {"finishReason": "content_filter"}, "content-filter"),
        ("completed", {"finishReason": 7}, "stop"),
        ("budget_exhausted", {}, "length"),
        ("halted_by_policy", {}, "other"),
        (5, {}, "error"),  # a status that is not a string reads as failed
    ],
)
def test_finish_reasons(status: Any, extra: dict[str, Any], reason: str) -> None:
    chunks = project([("completion", {"status": status, **extra})])
    assert next(c for c in chunks if c != "[DONE]" and c["type"] == "finish")["finishReason"] == (
        reason
    )


def test_a_stream_cut_short_closes_everything_and_says_interrupted() -> None:
    chunks = project(
        [
            ("reasoning_delta", {"delta": "thinking"}),
            ("tool_call_start", {"id": "c1", "name": "sleep", "arguments": {}}),
        ],
        close="subscriber_cut_off",
    )
    assert types(chunks)[-6:] == [
        "tool-input-available",
        "tool-output-error",
        "finish-step",
        "error",
        "finish",
        "[DONE]",
    ]
    assert "subscriber_cut_off" in chunks[-3]["errorText"]
    assert chunks[-2]["finishReason"] == "interrupted"


def test_permission_requests_are_kept_in_the_message() -> None:
    request = {"requestId": "p1", "toolCall": {"id": "c1", "name": "write_note"}}
    chunks = project([("permission_request", request)])
    part = next(c for c in chunks if c != "[DONE]" and c["type"].startswith("data-"))
    assert part == {"type": "data-loopgate-permission_request", "id": "r1:1", "data": request}


def test_nothing_after_the_end() -> None:
    context = ProjectorContext(run_id="r1", thread_id="r1")
    projector = ADAPTER.projector(context)
    projector.start()
    projector.feed(Envelope("r1", 1, T0, "completion", {"status": "completed"}))
    assert projector.feed(Envelope("r1", 2, T0, "content_delta", {"delta": "late"})) == []
    assert projector.close() == []


def test_render_is_one_data_line_per_chunk_and_done_last() -> None:
    context = ProjectorContext(run_id="r1", thread_id="r1")
    projector = ADAPTER.projector(context)
    messages = projector.start() + projector.feed(
        Envelope("r1", 1, T0, "completion", {"status": "completed"})
    )
    raw = ADAPTER.render(messages)
    frames = raw.split(b"\n\n")
    assert frames[-1] == b"" and frames[-2] == b"data: [DONE]"
    assert all(f.startswith(b"data: {") and b"\n" not in f for f in frames[:-2])
    assert b"".join(ADAPTER.render([m]) for m in messages) == raw
