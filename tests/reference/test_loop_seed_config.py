"""The LoopConfig settings of seed 001 beyond the first cut: bounded tool results in the
context, steering that interrupts, wrap-up with or without tools, the wrap-up time cap on tools
and streams, and the cap on a stream that makes no tool call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from loopgate.contracts.messages import Message, ToolCall
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.control import TurnControl
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tool_calls import INTERRUPTED
from loopgate.gateway.reference.tools import DemoTools
from loopgate.gateway.reference.truncation import bounded
from loopgate.gateway.reference.types import (
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolResult,
)
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    Sleep,
    calls,
    check_stream,
    ok,
    text,
    user,
)

pytestmark = pytest.mark.anyio

MEGABYTE = 1_000_000


async def run(provider, executor=None, config=None, history=None, control=None):
    loop = CoreLoop(provider, executor or FakeExecutor({}), config)
    rec = Recorder()
    new_history = await loop.run_turn(history or user("hi"), rec, control)
    return rec, new_history


def returns(content: str):
    async def handler(call: ToolCall) -> ToolResult:
        return ToolResult(success=True, content=content)

    return handler


# --- max_tool_result_chars ----------------------------------------------------------------


@pytest.mark.parametrize("persist", [False, True])
async def test_a_megabyte_result_reaches_the_model_bounded(persist: bool):
    big = "H" * (MEGABYTE // 2) + "T" * (MEGABYTE // 2)
    provider = FakeProvider(calls(("big", {})), text("ok"))
    config = LoopConfig(persist_tool_results=persist)
    rec, history = await run(provider, FakeExecutor({"big": returns(big)}), config)
    seen = provider.requests[1].messages[-1]
    assert seen.role == "tool" and len(seen.content) == 32_000  # the marker line included
    head, marker, tail = seen.content.partition("\n\n[… 968,050 of 1,000,000 characters left")
    assert head == "H" * 15_975 and tail.endswith("T" * 15_975) and marker
    assert history[2].content == seen.content  # the turn's history holds the bounded one
    result = rec.of("tool_call_result")[0]
    assert result["truncated"] is True and result["omittedChars"] == 968_050
    assert result["resultPreview"] == "H" * 300 + "…"
    # The whole result stays in the event only where persist_tool_results says so.
    assert ("result" in result) is persist
    if persist:
        assert result["result"] == big


async def test_a_result_within_the_limit_is_untouched():
    provider = FakeProvider(calls(("a", {})), text("ok"))
    config = LoopConfig(max_tool_result_chars=5)
    rec, _ = await run(provider, FakeExecutor({"a": returns("12345")}), config)
    assert provider.requests[1].messages[-1].content == "12345"
    assert "truncated" not in rec.of("tool_call_result")[0]


async def test_head_and_tail_with_a_small_limit():
    provider = FakeProvider(calls(("a", {})), text("ok"))
    config = LoopConfig(max_tool_result_chars=10)
    rec, _ = await run(provider, FakeExecutor({"a": returns("0123456789ABCDEFGHIJ")}), config)
    # Too small a limit for the marker line: the head alone.
    assert provider.requests[1].messages[-1].content == "0123456789"
    assert rec.of("tool_call_result")[0]["omittedChars"] == 10
    text_, omitted = bounded("0123456789" * 10, 60)
    assert text_ == "01234567890\n\n[… 79 of 100 characters left out …]\n\n0123456789"
    assert (len(text_), omitted) == (60, 79)
    assert bounded(text_, 60) == (text_, 0)  # bounding twice changes nothing


async def test_failed_results_are_bounded_too():
    async def noisy(call: ToolCall) -> ToolResult:
        return ToolResult(success=False, error="boom", content="x" * 500)

    provider = FakeProvider(calls(("a", {})), text("ok"))
    rec, _ = await run(provider, FakeExecutor({"a": noisy}), LoopConfig(max_tool_result_chars=100))
    seen = provider.requests[1].messages[-1].content
    assert seen.startswith("Error: boom\n") and "left out" in seen
    assert rec.of("tool_call_result")[0]["truncated"] is True


async def test_tool_results_already_in_the_history_are_bounded_in_the_request_only():
    huge = "z" * 50_000
    history = [
        Message(role="user", content="hi"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="a", arguments={})]),
        Message(role="tool", tool_call_id="c1", name="a", content=huge),
        Message(role="user", content="and now?"),
    ]
    provider = FakeProvider(text("ok"))
    rec, new_history = await run(provider, history=history)
    assert len(provider.requests[0].messages[2].content) == 32_000
    assert new_history[2].content == huge  # history is never rewritten
    assert check_stream(rec.events)["status"] == "completed"


class Capturing(ScriptedProvider):
    def __init__(self) -> None:
        super().__init__(delay_s=0)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(request)
        return super().stream(request)


async def test_the_lorem_demo_tool_megabyte_does_not_reach_the_scripted_model(tmp_path: Path):
    provider = Capturing()
    loop = CoreLoop(provider, DemoTools(tmp_path), LoopConfig(persist_tool_results=True))
    rec = Recorder()
    history = await loop.run_turn(user("big result: fetch the archive"), rec)
    assert check_stream(rec.events)["status"] == "completed"
    [result] = rec.of("tool_call_result")
    assert result["name"] == "lorem" and len(result["result"]) == MEGABYTE
    assert result["truncated"] is True
    tool_messages = [m for r in provider.requests for m in r.messages if m.role == "tool"]
    assert tool_messages and all(len(m.content) <= 32_000 for m in tool_messages)
    assert all(len(m.content) <= 32_000 for m in history)


# --- steer_mode -----------------------------------------------------------------------------


async def test_steer_interrupt_stops_the_stream_at_once():
    provider = FakeProvider(
        [TextChunk("partial"), Sleep(10), TextChunk("never")], text("steered answer")
    )
    control = TurnControl()
    rec = Recorder()
    steered_at: list[float] = []

    def on_event(kind: str, data: dict) -> None:
        if kind == "content_delta" and data["delta"] == "partial":
            steered_at.append(anyio.current_time())
            control.steer("change of plan")

    rec.on_event = on_event
    loop = CoreLoop(provider, FakeExecutor({}), LoopConfig(steer_mode="interrupt"))
    history = await loop.run_turn(user("hi"), rec, control)
    first = rec.of("llm_response")[0]
    assert first["finishReason"] == "interrupted"
    assert rec.times[rec.kinds().index("llm_response")] - steered_at[0] < 0.5
    assert rec.of("steer") == [{"content": "change of plan", "round": 2}]
    assert "never" not in rec.text()
    assert [m.content for m in history] == ["hi", "partial", "change of plan", "steered answer"]
    assert provider.requests[1].messages[-1].content == "change of plan"
    assert check_stream(rec.events)["status"] == "completed"


async def test_steer_boundary_waits_for_the_stream():
    provider = FakeProvider([TextChunk("partial"), Sleep(0.05), TextChunk(" end")], text("next"))
    control = TurnControl()
    rec = Recorder()
    rec.on_event = lambda kind, data: (
        control.steer("later") if kind == "content_delta" and data["delta"] == "partial" else None
    )
    loop = CoreLoop(provider, FakeExecutor({}), LoopConfig(steer_mode="boundary"))
    history = await loop.run_turn(user("hi"), rec, control)
    assert rec.of("llm_response")[0]["finishReason"] == "stop"
    assert [m.content for m in history] == ["hi", "partial end", "later", "next"]


async def test_steer_interrupt_stops_the_tools_without_counting_errors():
    hanging = anyio.Event()

    async def hang(call: ToolCall) -> ToolResult:
        hanging.set()
        await anyio.sleep(30)
        return ToolResult(success=True, content="never")

    provider = FakeProvider(calls(("hang", {}), ("quick", {})), text("steered"))
    executor = FakeExecutor({"hang": hang, "quick": ok()})
    control = TurnControl()
    config = LoopConfig(steer_mode="interrupt", max_tool_errors=1)
    loop = CoreLoop(provider, executor, config)
    rec = Recorder()
    result: list[list[Message]] = []

    async def turn() -> None:
        result.append(await loop.run_turn(user("hi"), rec, control))

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await hanging.wait()
        control.steer("stop that, just answer")
    assert anyio.current_time() - start < 1
    results = rec.of("tool_call_result")
    assert [(r["name"], r["success"], r["error"]) for r in results] == [
        ("hang", False, INTERRUPTED),
        ("quick", False, INTERRUPTED),
    ]
    assert [c.name for c in executor.executed] == ["hang"]  # quick never started
    assert rec.of("stage_complete")[0]["consecutiveToolErrors"] == 0
    assert rec.of("steer") == [{"content": "stop that, just answer", "round": 2}]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed" and terminal["toolErrorCount"] == 0
    history = result[0]
    ids = {c.id for m in history for c in m.tool_calls}
    assert ids == {m.tool_call_id for m in history if m.role == "tool"}
    assert provider.requests[1].messages[-1].content == "stop that, just answer"


# --- wrap_up_keeps_tools ------------------------------------------------------------------


async def test_wrap_up_withholds_tools_at_once_by_default():
    provider = FakeProvider([Sleep(0.03), *calls(("a", {}))], text("final"))
    config = LoopConfig(soft_timeout_ms=20, wrap_up_max_tool_rounds=3)
    rec, history = await run(provider, FakeExecutor({"a": ok()}), config)
    assert len(rec.of("soft_timeout")) == 1
    # The seed's default: wrap-up offers no tools; wrap_up_max_tool_rounds does not apply.
    assert [len(r.tools) for r in provider.requests] == [1, 0]
    nudge = history[3]
    assert nudge.role == "system" and "Wrap up now" in nudge.content
    assert "no more tool calls" in nudge.content
    assert check_stream(rec.events)["status"] == "completed"


async def test_wrap_up_keeps_tools_for_its_rounds():
    provider = FakeProvider([Sleep(0.03), *calls(("a", {}))], calls(("a", {"i": 2})), text("x"))
    config = LoopConfig(soft_timeout_ms=20, wrap_up_keeps_tools=True, wrap_up_max_tool_rounds=1)
    rec, history = await run(provider, FakeExecutor({"a": ok()}), config)
    # One more tool round in wrap-up, then a round without tools.
    assert [len(r.tools) for r in provider.requests] == [1, 1, 0]
    assert "1 more tool round" in history[3].content
    assert len(rec.of("tool_call_start")) == 2
    assert check_stream(rec.events)["status"] == "completed"


# --- wrap_up_tool_timeout_ms --------------------------------------------------------------


async def test_wrap_up_tool_timeout_caps_tools_in_wrap_up_only():
    async def slowish(call: ToolCall) -> ToolResult:
        await anyio.sleep(0.15 if call.arguments.get("late") else 0.08)
        return ToolResult(success=True, content="done")

    provider = FakeProvider(
        [Sleep(0.03), *calls(("slow", {}))], calls(("slow", {"late": True})), text("finished")
    )
    config = LoopConfig(
        soft_timeout_ms=20,
        wrap_up_keeps_tools=True,
        wrap_up_tool_timeout_ms=50,
        tool_timeout_ms=60_000,
    )
    rec, _ = await run(provider, FakeExecutor({"slow": slowish}), config)
    before, during = rec.of("tool_call_result")
    assert before["success"] is True  # round 1 ran before the soft timeout: not capped
    assert during["success"] is False and during["error"] == "timed out after 50 ms"
    assert check_stream(rec.events)["status"] == "completed"


async def test_wrap_up_tool_timeout_caps_a_wrap_up_stream():
    provider = FakeProvider(
        [Sleep(0.03), *calls(("a", {}))],
        [TextChunk("best answer so far"), Sleep(10), TextChunk("never")],
    )
    config = LoopConfig(soft_timeout_ms=20, wrap_up_tool_timeout_ms=50)
    start = anyio.current_time()
    rec, history = await run(provider, FakeExecutor({"a": ok()}), config)
    assert anyio.current_time() - start < 2
    assert rec.of("llm_response")[-1]["finishReason"] == "wrap_up_timeout"
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed" and terminal["reason"] == "wrap_up_timeout"
    assert history[-1].content == "best answer so far"


async def test_without_wrap_up_tool_timeout_streams_are_not_capped():
    provider = FakeProvider(
        [Sleep(0.03), *calls(("a", {}))], [TextChunk("slow "), Sleep(0.1), *text("answer")]
    )
    rec, _ = await run(provider, FakeExecutor({"a": ok()}), LoopConfig(soft_timeout_ms=20))
    assert rec.text() == "slow answer" and rec.terminal["reason"] == "stop"


# --- idle_stream_max_chars ----------------------------------------------------------------


async def test_idle_stream_max_chars_cuts_a_stream_without_tool_calls():
    provider = FakeProvider(
        [ReasoningChunk("r" * 40), TextChunk("t" * 40), Sleep(10), TextChunk("never")]
    )
    start = anyio.current_time()
    rec, history = await run(provider, config=LoopConfig(idle_stream_max_chars=60))
    assert anyio.current_time() - start < 2
    error = rec.of("error")[0]
    assert error["phase"] == "llm_stream"
    assert error["message"] == (
        "the model streamed more than 60 characters of text and reasoning without a tool call"
    )
    assert check_stream(rec.events)["status"] == "failed"
    assert history[-1].content == "t" * 40  # what streamed is kept


async def test_idle_stream_max_chars_spares_a_stream_with_a_tool_call():
    provider = FakeProvider(
        [ToolCallChunk(index=0, id="c", name="a", arguments="{}"), TextChunk("t" * 100)],
        text("done"),
    )
    rec, _ = await run(provider, FakeExecutor({"a": ok()}), LoopConfig(idle_stream_max_chars=60))
    assert check_stream(rec.events)["status"] == "completed"
    assert rec.of("tool_call_start")
