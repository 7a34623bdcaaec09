"""The OpenAI projector: goldens byte for byte, the SDK's own types for every chunk and every
folded completion, and the cases no recording has (fed by hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from conformance.runner import (
    EXPECTED,
    golden_path,
    load_stream,
    regenerate_command,
    render_golden,
    stream_paths,
)
from loopgate.adapters.openai import OpenAIAdapter
from loopgate.adapters.openai.completion import fold
from loopgate.adapters.openai.projector import CLIENT_TOOLS, CREATED, INCLUDE_USAGE, MODEL
from loopgate.adapters.openai.wire import Completion, ErrorBody
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import ProjectorContext, as_served
from tests.gateway.harness import REPO

TARGET = "openai"
HOW = f"regenerate (after reviewing the change) with: cd {REPO} && {regenerate_command(TARGET)}"
ADAPTER = OpenAIAdapter()
T0 = 1_800_000_000_000_000_000


def project(
    events: list[tuple[str, dict[str, Any]]] | list[Envelope],
    options: dict[str, Any] | None = None,
    *,
    close: str | None = None,
    run_id: str = "r1",
) -> list[Any]:
    envelopes = [
        e if isinstance(e, Envelope) else Envelope(run_id, seq, T0 + seq * 1_000_000, e[0], e[1])
        for seq, e in enumerate(events, start=1)
    ]
    context = ProjectorContext(run_id=run_id, thread_id=run_id, options=options or {})
    projector = ADAPTER.projector(context)
    out = projector.start()
    for envelope in envelopes:
        out += projector.feed(envelope)
    return out + projector.close(close)


def builtins(messages: list[Any]) -> list[Any]:
    return [ADAPTER.to_builtins(m) for m in messages]


def chunks(messages: list[Any]) -> list[dict[str, Any]]:
    return [m for m in builtins(messages) if isinstance(m, dict) and "error" not in m]


def deltas(messages: list[Any], field: str) -> str:
    return "".join(
        c["choices"][0]["delta"].get(field, "") for c in chunks(messages) if c["choices"]
    )


# --- goldens ------------------------------------------------------------------------------


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
def test_every_chunk_parses_as_the_sdk_reads_it(stream: Path) -> None:
    """Each line is a chunk the SDK's own model takes, unchanged but for our extension, or
    the error line, and the stream ends with [DONE] once."""
    lines = [
        msgspec.json.decode(line) for line in golden_path(TARGET, stream).read_bytes().splitlines()
    ]
    assert lines[-1] == "[DONE]" and lines.count("[DONE]") == 1
    body = lines[:-1]
    errors = [line for line in body if "error" in line]
    assert len(errors) <= 1 and (not errors or errors[0] is body[-1])
    for index, raw in enumerate(line for line in body if "error" not in line):
        chunk = ChatCompletionChunk.model_validate(raw)
        assert set(chunk.model_extra or {}) <= {"loopgate"}, f"chunk {index}: {chunk.model_extra}"
        dumped = chunk.model_dump(mode="json", exclude_unset=True)
        assert dumped == raw, f"chunk {index} changed through the SDK's model"
    with_choices = [line for line in body if line.get("choices")]
    assert with_choices[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("role" not in line["choices"][0]["delta"] for line in with_choices[1:])
    finishes = [line["choices"][0]["finish_reason"] for line in with_choices]
    if errors:
        assert set(finishes) == {None}
        assert set(errors[0]["error"]) == {"message", "type", "param", "code"}
    else:
        assert finishes[-1] is not None and set(finishes[:-1]) == {None}
        assert body[-1]["choices"] == [] and body[-1]["usage"]["total_tokens"] >= 0


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_every_recording_folds_into_a_completion_the_sdk_reads(stream: Path) -> None:
    messages = project(as_served(load_stream(stream)), run_id=stream.stem)
    folded = fold(messages)
    if isinstance(folded, ErrorBody):
        assert stream.stem in {"provider-error", "provider-error-retry", "truncated"}
        return
    raw = msgspec.to_builtins(folded)
    completion = ChatCompletion.model_validate(raw)
    assert completion.choices[0].message.content == (
        deltas(messages, "content") or (None if completion.choices[0].message.tool_calls else "")
    )
    events = [c["loopgate"] for c in chunks(messages) if "loopgate" in c]
    assert raw["loopgate"]["events"] == events


def test_goldens_cover_every_kind_of_ending() -> None:
    def last_finish(name: str) -> Any:
        lines = [
            msgspec.json.decode(x)
            for x in (EXPECTED / TARGET / f"{name}.jsonl").read_bytes().splitlines()
        ]
        if "error" in lines[-2]:
            return lines[-2]["error"]["code"]
        return [x for x in lines if isinstance(x, dict) and x.get("choices")][-1]["choices"][0][
            "finish_reason"
        ]

    assert last_finish("plain-answer") == "stop"
    assert last_finish("client-tool") == "tool_calls"
    assert last_finish("max-rounds") == "length"
    assert last_finish("seed-engine-budget") == "length"
    assert last_finish("cancel-mid-text") == "stop"
    assert last_finish("waiting-user") == "stop"
    assert last_finish("tolerant-payloads") == "stop"  # halted_by_policy, carried in loopgate
    assert last_finish("provider-error") == "provider_error"
    assert last_finish("truncated") == "truncated"


# --- by hand ------------------------------------------------------------------------------

ROUND = [
    ("stage_start", {"model": "m", "round": 1}),
    ("reasoning_delta", {"delta": "Think"}),
    ("reasoning_delta", {"delta": "ing."}),
    ("content_delta", {"delta": "Let me "}),
    ("content_delta", {"delta": "check."}),
    ("llm_response", {"promptTokens": 10, "completionTokens": 5, "reasoningTokens": 2}),
]
TOOLS = [
    ("tool_call_start", {"id": "c1", "name": "clock", "arguments": {}}),
    ("tool_call_start", {"id": "c2", "name": "pick", "arguments": {"a": [1, "é"]}}),
]


def test_client_tools_stream_as_tool_calls_and_end_with_tool_calls() -> None:
    events = [
        *ROUND,
        *TOOLS,
        ("tool_call_result", {"id": "c1", "name": "clock", "success": True, "resultPreview": "9"}),
        (
            "completion",
            {"status": "waiting_user", "reason": "client_tool", "pendingToolCallIds": ["c2"]},
        ),
    ]
    out = chunks(project(events, {CLIENT_TOOLS: ["pick"], INCLUDE_USAGE: False}))
    handed = [c for c in out if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert len(handed) == 1
    assert handed[0]["choices"][0]["delta"]["tool_calls"] == [
        {
            "index": 0,
            "id": "c2",
            "type": "function",
            "function": {"name": "pick", "arguments": '{"a":[1,"é"]}'},
        }
    ]
    # The server's own tool is an event, never a tool call the client would have to run.
    kinds = [c["loopgate"]["kind"] for c in out if "loopgate" in c]
    assert kinds.count("tool_call_start") == 1 and "tool_call_result" in kinds
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert out.index(handed[0]) < len(out) - 1  # streamed when it started, not at the end
    assert all(c["choices"] for c in out)  # no usage chunk when not asked for


def test_a_pending_call_the_request_did_not_name_is_handed_over_at_the_end() -> None:
    events = [*TOOLS, ("completion", {"status": "waiting_user", "reason": "client_tool"})]
    out = chunks(project(events))
    handed = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in out
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    # Without pendingToolCallIds, every call still in flight is the client's.
    assert [(h["index"], h["id"]) for h in handed] == [(0, "c1"), (1, "c2")]
    assert handed[0]["function"]["arguments"] == "{}"


def test_rounds_continue_one_message_as_paragraphs() -> None:
    second = [
        ("stage_start", {"round": 2}),
        ("reasoning_delta", {"delta": "More."}),
        ("content_delta", {"delta": "Done."}),
    ]
    out = project([*ROUND, *second, ("completion", {"status": "completed"})])
    assert deltas(out, "content") == "Let me check.\n\nDone."
    assert deltas(out, "reasoning_content") == "Thinking.\n\nMore."
    usage = chunks(out)[-1]["usage"]
    assert usage == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


def test_the_context_names_the_model_and_the_time() -> None:
    out = chunks(project(ROUND, {MODEL: "loopgate-scripted", CREATED: 1_700_000_000}))
    assert {(c["id"], c["model"], c["created"]) for c in out} == {
        ("chatcmpl-r1", "loopgate-scripted", 1_700_000_000)
    }
    # A replay is not told: the first event's time, the model loopgate answers to.
    replayed = chunks(project(ROUND))
    assert {(c["model"], c["created"]) for c in replayed} == {("loopgate", T0 // 10**9)}


def test_a_stream_cut_short_ends_with_an_error_line_then_done() -> None:
    out = builtins(project(ROUND[:4], close="subscriber_cut_off"))
    assert out[-2] == {
        "error": {
            "message": "the run ended without a final answer (subscriber_cut_off)",
            "type": "server_error",
            "param": None,
            "code": "subscriber_cut_off",
        }
    }
    assert out[-1] == "[DONE]"
    rendered = ADAPTER.render(project(ROUND[:4], close="truncated"))
    assert rendered.endswith(b"\n\ndata: [DONE]\n\n") and b'data: {"error":' in rendered


def test_a_failed_run_says_why_after_its_events() -> None:
    events = [
        ("content_delta", {"delta": "Part"}),
        ("error", {"message": "upstream gone", "phase": "llm_stream"}),
        ("completion", {"status": "failed", "reason": "provider_error"}),
    ]
    out = builtins(project(events))
    assert [c["loopgate"]["kind"] for c in out if isinstance(c, dict) and "loopgate" in c] == [
        "error",
        "completion",
    ]
    assert out[-2]["error"]["message"] == "upstream gone" and out[-1] == "[DONE]"
    assert fold(project(events)) == ErrorBody(
        message="upstream gone", type="server_error", code="provider_error"
    )


def test_unknown_kinds_and_foreign_fields_pass_through_as_events() -> None:
    events = [
        ("x_memory_recall", {"hits": [{"id": 1}]}),
        ("content_delta", {"delta": {"text": "odd"}}),
        ("tool_call_result", {"id": "orphan", "name": "lookup", "success": True}),
        ("completion", {"status": "completed", "finishReason": "length", "extra": {"deep": [1]}}),
    ]
    out = chunks(project(events))
    carried = [c["loopgate"] for c in out if "loopgate" in c]
    assert [e["kind"] for e in carried] == [
        "x_memory_recall",
        "content_delta",
        "tool_call_result",
        "completion",
    ]
    assert carried[-1]["data"]["extra"] == {"deep": [1]}
    assert out[-2]["choices"][0]["finish_reason"] == "length"  # the model hit its token limit


def test_a_question_to_the_user_is_the_answer_text() -> None:
    ask = {"question": "A or B?"}
    events = [
        ("tool_call_start", {"id": "q", "name": "ask_user", "arguments": ask}),
        ("completion", {"status": "waiting_user", "reason": "ask_user", "toolCallId": "q"}),
    ]
    assert deltas(project(events), "content") == "A or B?"
    # A round that said something has asked in its own words.
    said = [("content_delta", {"delta": "Which one?"}), *events]
    assert deltas(project(said), "content") == "Which one?"


def test_folded_completion_carries_calls_and_no_text() -> None:
    events = [*TOOLS, ("completion", {"status": "waiting_user", "reason": "client_tool"})]
    folded = fold(project(events, {CLIENT_TOOLS: ["clock", "pick"]}))
    assert isinstance(folded, Completion)
    message = ChatCompletion.model_validate(msgspec.to_builtins(folded)).choices[0].message
    assert message.content is None and [c.id for c in message.tool_calls or []] == ["c1", "c2"]
    assert folded.choices[0].finish_reason == "tool_calls"
