"""The reference loop's event order and every LoopConfig limit."""

from __future__ import annotations

import anyio
import pytest

from loopgate.contracts.messages import ToolCall, ToolSpec
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.types import (
    FinishChunk,
    LoopContext,
    ProviderError,
    TextChunk,
    ToolCallChunk,
    ToolResult,
    UsageChunk,
)
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    Sleep,
    calls,
    check_stream,
    failing,
    ok,
    reasoning,
    text,
    user,
)

pytestmark = pytest.mark.anyio


async def run(provider, executor=None, history=None, **kwargs):
    executor = executor or FakeExecutor({})
    config = kwargs.pop("config", None)
    loop = CoreLoop(provider, executor, config, **kwargs)
    rec = Recorder()
    new_history = await loop.run_turn(history or user("hi"), rec)
    return rec, new_history


async def test_plain_answer_order_and_history():
    provider = FakeProvider(reasoning("let me", " think") + text("Hel", "lo"))
    rec, history = await run(provider)
    assert rec.kinds() == [
        "stage_start",
        "llm_request",
        "reasoning_delta",
        "reasoning_delta",
        "content_delta",
        "content_delta",
        "llm_response",
        "completion",
    ]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed"
    assert terminal["textLength"] == 5
    assert terminal["toolCallCount"] == 0
    assert rec.of("llm_response")[0]["promptTokens"] == 10
    assert history[-1].role == "assistant"
    assert history[-1].content == "Hello"
    assert history[-1].reasoning == "let me think"


async def test_tool_round_order():
    provider = FakeProvider(calls(("a", {"x": 1}), ("b", {})), text("done"))
    executor = FakeExecutor({"a": ok("A"), "b": ok("B")})
    rec, history = await run(provider, executor)
    assert rec.kinds() == [
        "stage_start",
        "llm_request",
        "llm_response",
        "tool_call_start",
        "tool_call_start",
        "tool_call_result",
        "tool_call_result",
        "stage_complete",
        "completion",
        "stage_start",
        "llm_request",
        "content_delta",
        "llm_response",
        "completion",
    ]
    starts = rec.of("tool_call_start")
    assert [s["name"] for s in starts] == ["a", "b"]
    assert starts[0]["arguments"] == {"x": 1} and starts[0]["round"] == 1
    assert rec.of("completion")[0]["status"] == "executing"
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed" and terminal["toolCallCount"] == 2
    assert terminal["toolCalls"] == ["a", "b"]
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert history[2].tool_call_id == "call_0" and history[2].content == "A"
    # The model saw the observations in the second request.
    assert [m.role for m in provider.requests[1].messages][-2:] == ["tool", "tool"]


async def test_tool_call_deltas_assembled_by_index():
    script = [
        ToolCallChunk(index=1, id="c1", name="b", arguments='{"y"'),
        ToolCallChunk(index=0, id="c0", name="a", arguments='{"x":'),
        ToolCallChunk(index=1, arguments=": 2}"),
        ToolCallChunk(index=0, arguments=" 1}"),
        FinishChunk("tool_calls"),
    ]
    provider = FakeProvider(script, text("ok"))
    executor = FakeExecutor({"a": ok(), "b": ok()})
    rec, _ = await run(provider, executor)
    starts = rec.of("tool_call_start")
    assert [(s["id"], s["name"], s["arguments"]) for s in starts] == [
        ("c0", "a", {"x": 1}),
        ("c1", "b", {"y": 2}),
    ]
    assert [c.arguments for c in executor.executed] == [{"x": 1}, {"y": 2}]


async def test_bad_json_arguments_become_a_failed_result_the_model_sees():
    script = [ToolCallChunk(index=0, id="c0", name="a", arguments='{"x": '), FinishChunk("x")]
    provider = FakeProvider(script, text("sorry"))
    executor = FakeExecutor({"a": ok()})
    rec, history = await run(provider, executor)
    result = rec.of("tool_call_result")[0]
    assert result["success"] is False and "invalid JSON arguments" in result["error"]
    assert rec.of("tool_call_start")[0]["arguments"] == {}
    assert executor.executed == []
    assert history[2].role == "tool" and history[2].content.startswith("Error: invalid JSON")
    assert check_stream(rec.events)["status"] == "completed"


async def test_unknown_tool_is_a_failed_result():
    rec, _ = await run(FakeProvider(calls(("nope", {})), text("ok")), FakeExecutor({"a": ok()}))
    assert rec.of("tool_call_result")[0]["error"] == "unknown tool 'nope'"


async def test_temperature_and_max_tokens_reach_the_request():
    provider = FakeProvider(text("x"))
    await run(provider, config=LoopConfig(temperature=0.3, max_tokens=77))
    assert provider.requests[0].temperature == 0.3
    assert provider.requests[0].max_tokens == 77


async def test_max_rounds():
    provider = FakeProvider(calls(("a", {"n": 1})))  # repeats: calls a tool every round
    executor = FakeExecutor({"a": ok()})
    rec, _ = await run(provider, executor, config=LoopConfig(max_rounds=3, tool_dedup=False))
    assert rec.of("budget_exhausted") == [{"kind": "rounds", "rounds": 3}]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "budget_exhausted"
    assert len(provider.requests) == 3
    assert [d["status"] for d in rec.of("completion")] == ["executing"] * 3 + ["budget_exhausted"]


async def test_max_tool_errors_consecutive():
    provider = FakeProvider(calls(("bad", {})))
    executor = FakeExecutor({"bad": failing()})
    rec, _ = await run(provider, executor, config=LoopConfig(max_tool_errors=2, tool_dedup=False))
    terminal = check_stream(rec.events)
    assert terminal["status"] == "failed"
    assert "consecutive tool errors" in terminal["reason"]
    assert len(provider.requests) == 2
    assert rec.of("stage_complete")[-1]["consecutiveToolErrors"] == 2


async def test_success_resets_consecutive_tool_errors():
    provider = FakeProvider(
        calls(("bad", {"i": 1})), calls(("good", {})), calls(("bad", {"i": 2})), text("fine")
    )
    executor = FakeExecutor({"bad": failing(), "good": ok()})
    rec, _ = await run(provider, executor, config=LoopConfig(max_tool_errors=2))
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed" and terminal["toolErrorCount"] == 2


async def test_executor_exception_is_tool_error_without_internals():
    async def explode(call: ToolCall) -> ToolResult:
        raise RuntimeError("secret path /etc/shadow")

    rec, history = await run(
        FakeProvider(calls(("x", {})), text("ok")), FakeExecutor({"x": explode})
    )
    err = rec.of("tool_error")
    assert err and err[0]["id"] == "call_0"
    assert "secret" not in str(rec.events)
    assert rec.of("tool_call_result") == []
    assert history[2].role == "tool"


@pytest.mark.parametrize("dedup", [True, False])
async def test_tool_dedup(dedup: bool):
    provider = FakeProvider(
        calls(("a", {"x": 1, "y": 2}), ("a", {"y": 2, "x": 1})),
        calls(("a", {"x": 1, "y": 2})),
        text("done"),
    )
    executor = FakeExecutor({"a": ok("A")})
    rec, history = await run(provider, executor, config=LoopConfig(tool_dedup=dedup))
    results = rec.of("tool_call_result")
    assert len(results) == 3
    if dedup:
        assert len(executor.executed) == 1
        assert [r.get("deduplicated", False) for r in results] == [False, True, True]
    else:
        assert len(executor.executed) == 3
    assert all(m.content == "A" for m in history if m.role == "tool")


async def test_parallel_tools_overlap_only_when_all_safe():
    def setup(safe: set[str]):
        provider = FakeProvider(calls(("s1", {}), ("s2", {}), ("u", {}), ("s3", {})), text("ok"))
        executor = FakeExecutor(
            {"s1": ok(delay=0.05), "s2": ok(delay=0.05), "u": ok(delay=0.05), "s3": ok(delay=0.05)},
            safe=safe,
        )
        return provider, executor

    def overlaps(spans, a, b):
        sa = next(s for s in spans if s[0] == a)
        sb = next(s for s in spans if s[0] == b)
        return sa[1] < sb[2] and sb[1] < sa[2]

    provider, executor = setup({"s1", "s2", "s3"})
    rec, _ = await run(provider, executor)
    spans = executor.spans
    assert overlaps(spans, "call_0", "call_1")  # s1 ∥ s2
    assert not overlaps(spans, "call_1", "call_2")  # u runs alone
    assert not overlaps(spans, "call_2", "call_3")
    # Results are still reported in call order.
    assert [r["id"] for r in rec.of("tool_call_result")] == ["call_0", "call_1", "call_2", "call_3"]

    provider, executor = setup({"s1", "s2", "s3"})
    await run(provider, executor, config=LoopConfig(parallel_tools=False))
    ids = ["call_0", "call_1", "call_2", "call_3"]
    assert not any(overlaps(executor.spans, a, b) for a in ids for b in ids if a < b)


async def test_parallel_results_emitted_in_call_order_even_if_later_finishes_first():
    provider = FakeProvider(calls(("slow", {}), ("fast", {})), text("ok"))
    executor = FakeExecutor({"slow": ok(delay=0.08), "fast": ok()}, safe={"slow", "fast"})
    rec, _ = await run(provider, executor)
    assert [r["name"] for r in rec.of("tool_call_result")] == ["slow", "fast"]
    ends = {cid: end for cid, _, end in executor.spans}
    assert ends["call_1"] < ends["call_0"]


async def test_tool_timeout_turns_hung_call_into_failed_result():
    provider = FakeProvider(calls(("hang", {})), text("moved on"))
    executor = FakeExecutor({"hang": ok(delay=30)})
    start = anyio.current_time()
    rec, _ = await run(provider, executor, config=LoopConfig(tool_timeout_ms=50))
    assert anyio.current_time() - start < 2
    result = rec.of("tool_call_result")[0]
    assert result["success"] is False and result["error"] == "timed out after 50 ms"
    assert check_stream(rec.events)["status"] == "completed"


async def test_soft_timeout_wraps_up_then_final_round_without_tools():
    slow_call = [Sleep(0.03), *calls(("a", {}))]
    provider = FakeProvider(slow_call)  # would call tools forever
    executor = FakeExecutor({"a": ok()})
    config = LoopConfig(
        soft_timeout_ms=40, wrap_up_keeps_tools=True, wrap_up_max_tool_rounds=1, tool_dedup=False
    )
    rec, history = await run(provider, executor, config=config)
    soft = rec.of("soft_timeout")
    assert len(soft) == 1 and soft[0]["softTimeoutMs"] == 40 and soft[0]["elapsedMs"] >= 40
    after = rec.kinds().index("soft_timeout")
    tool_rounds_after = [
        d for d in rec.events[after:] if d[0] == "completion" and d[1]["status"] == "executing"
    ]
    assert len(tool_rounds_after) == 1
    assert provider.requests[-1].tools == []
    assert provider.requests[-2].tools != []
    assert any(m.role == "system" and "Wrap up" in m.content for m in history)
    terminal = check_stream(rec.events)
    # The last reply, offered no tools, was only a tool call: not an empty "completed"
    # (issue 36, seed 000's degenerate replies).
    assert (terminal["status"], terminal["reason"]) == ("failed", "wrap_up_without_answer")
    assert rec.of("error")[-1]["message"] == (
        "the model's wrap-up reply was only a tool call (a), not run: wrap-up offers no tools, "
        "and the model gave no answer"
    )
    assert rec.of("error")[-1]["phase"] == "llm_response"


async def test_a_wrap_up_answer_with_a_stray_tool_call_still_completes():
    provider = FakeProvider(
        [Sleep(0.03), *calls(("a", {}))],
        [TextChunk("the answer"), ToolCallChunk(index=0, id="c", name="a"), FinishChunk("stop")],
    )
    config = LoopConfig(soft_timeout_ms=20)
    rec, history = await run(provider, FakeExecutor({"a": ok()}), config=config)
    assert (rec.terminal["status"], rec.text()) == ("completed", "the answer")
    assert history[-1].content == "the answer"


async def test_wrap_up_hard_cap_stops_the_turn():
    provider = FakeProvider(
        [Sleep(0.03), *calls(("a", {}))], [Sleep(0.03), *calls(("a", {}))], [Sleep(5), *text("x")]
    )
    executor = FakeExecutor({"a": ok()})
    config = LoopConfig(
        soft_timeout_ms=20, wrap_up_hard_cap_ms=60, wrap_up_keeps_tools=True, tool_dedup=False
    )
    start = anyio.current_time()
    rec, _ = await run(provider, executor, config=config)
    assert anyio.current_time() - start < 2
    terminal = check_stream(rec.events)
    assert terminal["status"] == "budget_exhausted" and terminal["reason"] == "wrap_up_hard_cap"


async def test_token_budget():
    provider = FakeProvider(calls(("a", {"i": 1}), usage=(60, 50)))
    rec, _ = await run(provider, FakeExecutor({"a": ok()}), config=LoopConfig(budget=100))
    assert rec.of("budget_exhausted") == [{"kind": "tokens", "used": 110, "budget": 100}]
    assert check_stream(rec.events)["status"] == "budget_exhausted"
    assert len(provider.requests) == 1


async def test_idle_stream_timeout_is_a_provider_error():
    provider = FakeProvider([TextChunk("a"), Sleep(5), TextChunk("b")])
    start = anyio.current_time()
    rec, history = await run(provider, config=LoopConfig(idle_stream_timeout_ms=50))
    assert anyio.current_time() - start < 2
    err = rec.of("error")[0]
    assert err["phase"] == "llm_stream" and "idle" in err["message"]
    assert check_stream(rec.events)["status"] == "failed"
    assert history[-1].content == "a"  # what the user saw is kept


async def test_reasoning_without_progress():
    provider = FakeProvider(reasoning("x" * 30, "y" * 30, "z" * 30) + text("never"))
    rec, _ = await run(provider, config=LoopConfig(reasoning_without_progress_chars=50))
    assert "reasoning exceeded 50" in rec.of("error")[0]["message"]
    assert rec.of("content_delta") == []
    assert check_stream(rec.events)["status"] == "failed"


async def test_reasoning_interleaved_with_text_is_progress():
    provider = FakeProvider(
        [*reasoning("x" * 40), TextChunk("a"), *reasoning("y" * 40), *text("b")]
    )
    rec, _ = await run(provider, config=LoopConfig(reasoning_without_progress_chars=50))
    assert check_stream(rec.events)["status"] == "completed"


@pytest.mark.parametrize("persist", [False, True])
async def test_persist_tool_results_and_preview(persist: bool):
    big = "x" * 1000

    async def handler(call: ToolCall) -> ToolResult:
        return ToolResult(success=True, content=big)

    provider = FakeProvider(calls(("big", {})), text("ok"))
    rec, history = await run(
        provider, FakeExecutor({"big": handler}), config=LoopConfig(persist_tool_results=persist)
    )
    result = rec.of("tool_call_result")[0]
    assert result["resultPreview"] == "x" * 300 + "…"
    assert ("result" in result) is persist
    if persist:
        assert result["result"] == big
    assert history[2].content == big  # the model context keeps the full observation


async def test_provider_error_message_and_generic_exception_text_hidden():
    provider = FakeProvider([TextChunk("part"), ProviderError("rate limited", retryable=True)])
    rec, history = await run(provider)
    # Retryable, but "part" had streamed: not retried.
    assert rec.of("error") == [{"message": "rate limited", "round": 1, "phase": "llm_stream"}]
    assert rec.of("llm_response")[0]["error"] == "rate limited"
    assert len(rec.of("llm_request")) == 1
    assert check_stream(rec.events)["status"] == "failed"
    assert history[-1].content == "part"

    provider = FakeProvider([TextChunk("x"), KeyError("internal /secret/path")])
    rec, _ = await run(provider)
    assert rec.of("error")[0]["message"] == "model request failed"
    assert "secret" not in str(rec.events)


async def test_client_tools_are_not_executed_and_turn_waits():
    provider = FakeProvider(calls(("server", {}), ("show_chart", {"q": 1})))
    executor = FakeExecutor({"server": ok()})
    loop = CoreLoop(provider, executor, client_tools=[ToolSpec(name="show_chart")])
    rec = Recorder()
    history = await loop.run_turn(user("chart"), rec)
    assert [t.name for t in provider.requests[0].tools] == ["server", "show_chart"]
    assert [s["name"] for s in rec.of("tool_call_start")] == ["server", "show_chart"]
    assert [r["name"] for r in rec.of("tool_call_result")] == ["server"]
    assert [c.name for c in executor.executed] == ["server"]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "waiting_user" and terminal["reason"] == "client_tool"
    assert terminal["pendingToolCallIds"] == ["call_1"]
    assert history[1].tool_calls[1].name == "show_chart"
    assert not any(m.role == "tool" and m.tool_call_id == "call_1" for m in history)


async def test_client_tool_name_clash_rejected():
    with pytest.raises(ValueError, match="clash"):
        CoreLoop(
            FakeProvider(text("x")), FakeExecutor({"a": ok()}), client_tools=[ToolSpec(name="a")]
        )


async def test_suspending_tool_result_waits_for_user():
    async def ask(call: ToolCall) -> ToolResult:
        return ToolResult(success=True, content="A or B?", suspend=True, data={"reason": "ask"})

    rec, _ = await run(
        FakeProvider(calls(("ask", {}), ("b", {}))), FakeExecutor({"ask": ask, "b": ok()})
    )
    terminal = check_stream(rec.events)
    assert terminal["status"] == "waiting_user" and terminal["reason"] == "ask"
    assert len(rec.of("tool_call_result")) == 2  # the round finishes first


class Gate:
    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.asked: list[str] = []

    def needs_approval(self, call: ToolCall) -> bool:
        return call.name == "write"

    async def decide(self, call: ToolCall) -> str:
        self.asked.append(call.id)
        return self.decision


@pytest.mark.parametrize("decision", ["allow", "reject"])
async def test_permission_gate(decision: str):
    provider = FakeProvider(calls(("write", {}), ("read", {})), text("ok"))
    executor = FakeExecutor({"write": ok("written"), "read": ok("read")})
    gate = Gate(decision)
    rec, history = await run(provider, executor, permissions=gate)
    assert gate.asked == ["call_0"]
    write = rec.of("tool_call_result")[0]
    if decision == "allow":
        assert write["success"] is True
        assert [c.name for c in executor.executed] == ["write", "read"]
    else:
        assert write["success"] is False and write["error"] == "rejected by the user"
        assert [c.name for c in executor.executed] == ["read"]
        assert history[2].content == "Error: rejected by the user"


async def test_usage_counts_into_stage_complete_and_completion():
    provider = FakeProvider(calls(("a", {}), usage=(7, 3)), text("x", usage=(11, 2)))
    rec, _ = await run(provider, FakeExecutor({"a": ok()}))
    assert rec.of("stage_complete")[0]["promptTokens"] == 7
    terminal = rec.terminal
    assert terminal["promptTokens"] == 18 and terminal["completionTokens"] == 5


async def test_missing_usage_is_fine():
    provider = FakeProvider([TextChunk("x"), FinishChunk("stop")])
    rec, _ = await run(provider)
    assert "promptTokens" not in rec.of("llm_response")[0]
    assert rec.terminal["status"] == "completed"


async def test_tool_context_is_given_to_executor():
    seen: list[LoopContext] = []

    class Ex(FakeExecutor):
        async def execute(self, call, ctx):
            seen.append(ctx)
            return ToolResult(success=True, content="x")

    await run(FakeProvider(calls(("a", {})), text("ok")), Ex({"a": ok()}))
    assert seen[0].round == 1 and seen[0].history[0].content == "hi"


async def test_usage_chunk_only_stream_is_an_empty_answer():
    # Seed 000: a degenerate reply is a failure with a reason, not an empty completion.
    rec, _ = await run(FakeProvider([UsageChunk(prompt_tokens=1, completion_tokens=1)]))
    assert rec.terminal["status"] == "failed" and rec.terminal["reason"] == "empty_response"
    assert rec.terminal["textLength"] == 0
