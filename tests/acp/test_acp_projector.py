"""The sans-IO projector and the history rebuild, driven by the recorded streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import schema

from conformance.runner import (
    EXPECTED,
    golden_path,
    load_stream,
    regenerate_command,
    render_golden,
    stream_paths,
)
from loopgate.adapters.acp import ADAPTER
from loopgate.adapters.acp.projector import (
    AcpProjector,
    PermissionAsk,
    PromptAnswer,
    PromptFailure,
    SessionUpdate,
    tool_kind,
    tool_title,
)
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.history import NO_RESULT, messages_from_events
from loopgate.contracts.messages import ToolCall
from loopgate.contracts.projector import ProjectorContext
from tests.acp.support import UPDATE_MODELS, check_strict

STREAMS = {p.stem: p for p in stream_paths()}
HOW = f"regenerate after review: {regenerate_command('acp')}"


def project(name: str, **options: Any) -> list[Any]:
    envs = load_stream(STREAMS[name])
    p = AcpProjector(ProjectorContext(run_id=name, thread_id="sess", options=options))
    out = list(p.start())
    for env in envs:
        out.extend(p.feed(env))
    out.extend(p.close())
    return out


def env(seq: int, kind: str, data: Any) -> Envelope:
    return Envelope("r", seq, 0, kind, data)


@pytest.mark.parametrize("stream", list(STREAMS.values()), ids=lambda p: p.stem)
def test_golden_matches_and_is_valid_acp(stream: Path) -> None:
    path = golden_path("acp", stream)
    assert path.exists(), HOW
    assert render_golden("acp", stream) == path.read_bytes(), f"{path.name} differs; {HOW}"
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    *updates, last = lines
    for message in updates:
        assert message["method"] == "session/update"
        check_strict(schema.SessionNotification, message["params"])
        update = message["params"]["update"]
        check_strict(UPDATE_MODELS[update["sessionUpdate"]], update)
    if "result" in last:
        check_strict(schema.PromptResponse, last["result"])
    else:
        assert last["error"]["code"] == -32603 and last["error"]["message"]


def test_no_stale_goldens() -> None:
    stale = [p.name for p in (EXPECTED / "acp").glob("*.jsonl") if p.stem not in STREAMS]
    assert not stale, HOW


def test_stop_reasons() -> None:
    def end(name: str) -> Any:
        return project(name)[-1]

    assert end("plain-answer").result["stopReason"] == "end_turn"
    assert end("waiting-user").result["stopReason"] == "end_turn"
    assert end("cancel-mid-text").result["stopReason"] == "cancelled"
    assert end("max-rounds").result["stopReason"] == "max_turn_requests"
    failed = end("provider-error")
    assert isinstance(failed, PromptFailure) and "lost its connection" in failed.message
    assert isinstance(end("truncated"), PromptFailure)
    tokens = [
        env(1, "budget_exhausted", {"kind": "tokens", "used": 10, "budget": 5}),
        env(2, "completion", {"status": "budget_exhausted", "reason": "budget"}),
    ]
    p = AcpProjector(ProjectorContext(run_id="r", thread_id="s"))
    assert [i for e in tokens for i in p.feed(e)][-1].result["stopReason"] == "max_tokens"


def test_every_opened_tool_call_is_closed() -> None:
    for name in STREAMS:
        opened: set[str] = set()
        for item in project(name):
            if isinstance(item, SessionUpdate):
                update = item.params["update"]
                if update["sessionUpdate"] == "tool_call":
                    opened.add(update["toolCallId"])
                elif update.get("status") in ("completed", "failed"):
                    opened.discard(update["toolCallId"])
        assert not opened, f"{name}: tool calls left open: {opened}"


def test_failed_run_closes_open_tool_calls_first() -> None:
    items = project("truncated")
    assert isinstance(items[-1], PromptFailure)
    p = AcpProjector(ProjectorContext(run_id="r", thread_id="s"))
    p.feed(env(1, "tool_call_start", {"id": "c1", "name": "sleep", "arguments": {}}))
    p.feed(env(2, "error", {"message": "boom", "phase": "tool"}))
    out = p.feed(env(3, "completion", {"status": "failed", "reason": "tool_error"}))
    assert out[0].params["update"] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": [
            {
                "type": "content",
                "content": {"type": "text", "text": "the run ended before this tool call finished"},
            }
        ],
    }
    assert isinstance(out[1], PromptFailure) and out[1].message.endswith(": boom")
    assert p.feed(env(4, "content_delta", {"delta": "late"})) == []
    assert p.close() == []


def test_loop_internal_and_unknown_kinds_make_no_updates() -> None:
    p = AcpProjector(ProjectorContext(run_id="r", thread_id="s"))
    for i, kind in enumerate(
        ["stage_start", "llm_request", "hook_action", "soft_timeout", "steer", "x_vendor"], 1
    ):
        assert p.feed(env(i, kind, {"round": 1, "content": "x", "hook": "h", "action": "a"})) == []
    # Garbage payloads are skipped, never fatal.
    assert p.feed(env(7, "tool_call_start", {"id": 5, "name": None})) == []
    assert p.feed(env(8, "content_delta", {"delta": 3})) == []
    assert p.feed(env(9, "tool_call_result", {})) == []


def test_usage_update_only_with_a_known_context_size() -> None:
    assert not any(
        isinstance(i, SessionUpdate) and i.params["update"]["sessionUpdate"] == "usage_update"
        for i in project("unknown-kinds-fields")
    )
    usage = [
        i.params["update"]
        for i in project("unknown-kinds-fields", contextSize=128000)
        if isinstance(i, SessionUpdate) and i.params["update"]["sessionUpdate"] == "usage_update"
    ]
    assert usage[0] == {
        "sessionUpdate": "usage_update",
        "used": 51,
        "size": 128000,
        "cost": {"amount": 0.00012, "currency": "USD"},
    }
    for update in usage:
        check_strict(schema.UsageUpdate, update)


def test_permission_request_becomes_an_ask() -> None:
    p = AcpProjector(
        ProjectorContext(run_id="r", thread_id="s", options={"toolKinds": {"write_note": "edit"}})
    )
    p.feed(
        env(1, "tool_call_start", {"id": "c1", "name": "write_note", "arguments": {"name": "n"}})
    )
    ask = p.feed(
        env(
            2,
            "permission_request",
            {
                "requestId": "perm_1",
                "toolCall": {"id": "c1", "name": "write_note", "arguments": {"name": "n"}},
                "options": ["allow_once", "reject_once", "bogus"],
            },
        )
    )[0]
    assert isinstance(ask, PermissionAsk) and ask.request_id == "perm_1"
    check_strict(schema.RequestPermissionRequest, ask.params)
    assert [o["optionId"] for o in ask.params["options"]] == ["allow_once", "reject_once"]
    resumed = p.feed(
        env(
            3,
            "permission_result",
            {"requestId": "perm_1", "toolCallId": "c1", "decision": "allow_once"},
        )
    )
    assert resumed[0].params["update"]["status"] == "in_progress"
    wire = ADAPTER.to_builtins(ask)
    assert wire["method"] == "session/request_permission" and wire["id"] == "perm_1"


def test_tool_kind_and_title() -> None:
    assert tool_kind("read_file", {}, {}) == "read"
    assert tool_kind("write_note", {}, {}) == "edit"
    assert tool_kind("clock", {}, {}) == "other"
    assert tool_kind("x", {"kindHint": "fetch"}, {}) == "fetch"
    assert tool_kind("x", {"kindHint": "bogus"}, {"x": "execute"}) == "execute"
    assert tool_title("calc", {"expression": "1 + 2"}) == "calc: 1 + 2"
    assert tool_title("clock", {}) == "clock"
    assert len(tool_title("t", {"a": "x" * 500})) == 80


def test_history_of_a_tool_round() -> None:
    messages = messages_from_events(load_stream(STREAMS["one-tool-round"]))
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[0].tool_calls == [
        ToolCall(id="call_153012_0_0", name="calculate", arguments={"expression": "17 * 23 + 7"})
    ]
    assert messages[0].reasoning and messages[0].reasoning.startswith("Request:")
    assert messages[1].content == "398" and messages[1].tool_call_id == "call_153012_0_0"
    assert messages[2].content == "The result of 17 * 23 + 7 is 398."


def test_history_edge_cases() -> None:
    cancelled = messages_from_events(load_stream(STREAMS["cancel-mid-tool"]))
    assert cancelled[-1].role == "tool" and cancelled[-1].content == NO_RESULT
    failing = messages_from_events(load_stream(STREAMS["failing-tool"]))
    assert failing[1].content.startswith("Error: ")
    steering = messages_from_events(load_stream(STREAMS["steering"]))
    assert "user" in [m.role for m in steering]
    retried = messages_from_events(load_stream(STREAMS["provider-error-retry"]))
    text = "".join(m.content for m in retried)
    assert text.count("Let me start") <= 1  # the retried attempt's partial text is dropped
    for stream in STREAMS.values():
        for message in messages_from_events(load_stream(stream)):
            assert message.role in ("assistant", "tool", "user")


def test_answer_and_failure_render_as_responses() -> None:
    ok = ADAPTER.to_builtins(PromptAnswer({"stopReason": "end_turn"}))
    assert ok == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}
    bad = ADAPTER.render([PromptFailure(-32603, "m", {})])
    assert json.loads(bad) == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32603, "message": "m", "data": {}},
    }
