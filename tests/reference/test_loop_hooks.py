"""Every hook action, sync and async hooks, and hook failures."""

from __future__ import annotations

import pytest

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.hooks import (
    Accept,
    Continue,
    Fail,
    Narrate,
    NoHooks,
    Proceed,
    Reject,
    Retry,
    RoundSummary,
    Stop,
    Suspend,
)
from loopgate.gateway.reference.types import (
    LoopContext,
    ModelChunk,
    ProviderError,
    TextChunk,
    ToolResult,
)
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    calls,
    check_stream,
    ok,
    text,
    user,
)

pytestmark = pytest.mark.anyio


async def run(hooks, provider, executor=None):
    loop = CoreLoop(provider, executor or FakeExecutor({"a": ok("A")}), hooks=hooks)
    rec = Recorder()
    history = await loop.run_turn(user("hi"), rec)
    return rec, history


async def test_no_hooks_means_no_hook_events():
    rec, _ = await run(NoHooks(), FakeProvider(calls(("a", {})), text("x")))
    assert rec.of("hook_action") == []


async def test_pre_step_proceed_and_reject():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            return Proceed() if ctx.round == 1 else Reject(reason="enough")

    rec, _ = await run(H(), FakeProvider(calls(("a", {})), text("x")))
    actions = rec.of("hook_action")
    assert actions == [
        {"hook": "pre_step", "action": "proceed", "reason": "", "round": 1},
        {"hook": "pre_step", "action": "reject", "reason": "enough", "round": 2},
    ]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "failed" and "enough" in terminal["reason"]


async def test_async_hooks_are_awaited():
    class H(NoHooks):
        async def pre_step(self, ctx: LoopContext):
            return Reject(reason="async says no")

    rec, _ = await run(H(), FakeProvider(text("x")))
    assert rec.of("hook_action")[0]["reason"] == "async says no"
    assert rec.kinds() == ["hook_action", "completion"]


async def test_on_request_error_retry_then_fail():
    attempts: list[int] = []

    class H(NoHooks):
        def on_request_error(self, ctx, error, attempt):
            attempts.append(attempt)
            assert isinstance(error, ProviderError)
            return Retry(delay_ms=5) if attempt < 2 else Fail()

    provider = FakeProvider([TextChunk("a"), ProviderError("down")])
    rec, _ = await run(H(), provider)
    assert attempts == [1, 2]
    assert [r["attempt"] for r in rec.of("llm_request")] == [1, 2]
    actions = rec.of("hook_action")
    assert [(a["action"], a.get("delayMs")) for a in actions] == [("retry", 5), ("fail", None)]
    assert actions[0]["reason"] == "down"
    assert check_stream(rec.events)["status"] == "failed"
    assert rec.kinds()[-2:] == ["error", "completion"]


async def test_on_request_error_retry_succeeds():
    class H(NoHooks):
        def on_request_error(self, ctx, error, attempt):
            return Retry(delay_ms=1)

    provider = FakeProvider([TextChunk("par"), ProviderError("flaky")], text("whole"))
    rec, history = await run(H(), provider)
    assert check_stream(rec.events)["status"] == "completed"
    assert history[-1].content == "whole"  # the failed attempt's partial text is not kept
    assert rec.of("llm_response")[0]["error"] == "flaky"


async def test_before_completion_retry_then_narrate():
    seen: list[str] = []

    class H(NoHooks):
        def before_completion(self, ctx, text):
            seen.append(text)
            if len(seen) == 1:
                return Retry(message="cite your sources")
            return Narrate(text=" [checked]")

    provider = FakeProvider(text("first"), text("second"))
    rec, history = await run(H(), provider)
    assert seen == ["first", "second"]
    actions = rec.of("hook_action")
    assert [(a["action"], a["value"]) for a in actions] == [
        ("retry", "cite your sources"),
        ("narrate", " [checked]"),
    ]
    assert provider.requests[1].messages[-1].content == "cite your sources"
    assert provider.requests[1].messages[-1].role == "user"
    assert rec.text() == "firstsecond [checked]"
    assert history[-1].content == "second [checked]"
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed" and terminal["textLength"] == len(
        "firstsecond [checked]"
    )


async def test_before_completion_accept():
    class H(NoHooks):
        def before_completion(self, ctx, text):
            return Accept()

    rec, _ = await run(H(), FakeProvider(text("x")))
    assert rec.of("hook_action")[0]["action"] == "accept"


async def test_post_tool_result_continue_and_suspend():
    class H(NoHooks):
        def post_tool_result(self, ctx, call: ToolCall, result: ToolResult):
            return Suspend(reason="needs review") if call.name == "b" else Continue()

    provider = FakeProvider(calls(("a", {}), ("b", {})), text("never"))
    rec, _ = await run(H(), provider, FakeExecutor({"a": ok(), "b": ok()}))
    assert [a["action"] for a in rec.of("hook_action")] == ["continue", "suspend"]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "waiting_user" and terminal["reason"] == "needs review"
    assert len(provider.requests) == 1


async def test_tool_made_progress_proceed_and_stop():
    summaries: list[RoundSummary] = []

    class H(NoHooks):
        def tool_made_progress(self, ctx, round_summary: RoundSummary):
            summaries.append(round_summary)
            return Proceed() if round_summary.round == 1 else Stop(reason="going in circles")

    provider = FakeProvider(calls(("a", {"i": 1})), calls(("a", {"i": 2})), text("x"))
    rec, _ = await run(H(), provider)
    assert [s.tool_names for s in summaries] == [["a"], ["a"]]
    assert [a["action"] for a in rec.of("hook_action")] == ["proceed", "stop"]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "failed" and "going in circles" in terminal["reason"]


async def test_on_stream_chunk_observes_and_its_return_is_ignored():
    chunks: list[ModelChunk] = []

    class H(NoHooks):
        def on_stream_chunk(self, ctx, chunk):
            chunks.append(chunk)
            return Reject(reason="ignored")

    rec, _ = await run(H(), FakeProvider(text("a", "b")))
    assert [c for c in chunks if isinstance(c, TextChunk)] == [TextChunk("a"), TextChunk("b")]
    assert rec.of("hook_action") == []
    assert rec.terminal["status"] == "completed"


async def test_hook_exception_fails_turn_without_leaking_text():
    class H(NoHooks):
        def before_completion(self, ctx, text):
            raise RuntimeError("secret detail")

    rec, _ = await run(H(), FakeProvider(text("x")))
    assert "secret" not in str(rec.events)
    assert rec.of("error")[0]["phase"] == "hook"
    assert check_stream(rec.events)["status"] == "failed"


async def test_hook_returning_wrong_action_is_an_error():
    class H(NoHooks):
        def pre_step(self, ctx):
            return Narrate(text="nope")

    rec, _ = await run(H(), FakeProvider(text("x")))
    assert "unsupported action" in rec.of("error")[0]["message"]
    assert check_stream(rec.events)["status"] == "failed"


async def test_hook_failure_during_tool_round():
    class H(NoHooks):
        def post_tool_result(self, ctx, call, result):
            raise ValueError("x")

    provider = FakeProvider(calls(("a", {}), ("b", {})), text("x"))
    rec, _ = await run(
        H(), provider, FakeExecutor({"a": ok(), "b": ok(delay=0.05)}, safe={"a", "b"})
    )
    assert check_stream(rec.events)["status"] == "failed"


async def test_hooks_do_not_rewrite_history():
    class H(NoHooks):
        def before_completion(self, ctx, text):
            assert ctx.history[0].content == "hi"
            return None

    _, history = await run(H(), FakeProvider(text("x")))
    assert [m.content for m in history] == ["hi", "x"]


async def test_hooks_set_on_the_instance_or_on_a_plain_class_are_called():
    """NoHooks' own no-ops are skipped; any other hook, wherever it is defined, runs."""

    class Plain:  # not a NoHooks subclass: only the hooks it has
        def pre_step(self, ctx: LoopContext) -> Proceed:
            return Proceed()

    on_instance = NoHooks()
    vars(on_instance)["before_completion"] = lambda ctx, text: Narrate(text="!")
    for hooks, expected in ((Plain(), "pre_step"), (on_instance, "before_completion")):
        rec, _ = await run(hooks, FakeProvider(text("x")))
        assert [a["hook"] for a in rec.of("hook_action")] == [expected]
        assert check_stream(rec.events)["status"] == "completed"
