"""The hook actions of seed 001 beyond the first cut (pre_step append / rewrite / compact /
tool_choice, post_tool_result replace), several hooks at one point, and the caps on redos."""

from __future__ import annotations

from typing import Any

import pytest

from loopgate.contracts.messages import Message, ToolCall
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.hooks import (
    MAX_COMPLETION_RETRIES,
    MAX_REQUEST_ATTEMPTS,
    Accept,
    Append,
    Compact,
    Continue,
    Fail,
    Narrate,
    NoHooks,
    Proceed,
    Reject,
    Replace,
    Retry,
    Rewrite,
    Stop,
    Suspend,
    ToolChoice,
)
from loopgate.gateway.reference.types import LoopContext, ProviderError, ToolResult
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    calls,
    check_stream,
    failing,
    ok,
    text,
    user,
)

pytestmark = pytest.mark.anyio


async def run(hooks, provider, executor=None, config=None):
    loop = CoreLoop(provider, executor or FakeExecutor({"a": ok("A")}), config, hooks=hooks)
    rec = Recorder()
    history = await loop.run_turn(user("hi"), rec)
    return rec, history


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


# --- pre_step -----------------------------------------------------------------------------


async def test_pre_step_append_adds_to_history_before_the_request():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            if ctx.round == 1:
                return Append(messages=[Message(role="system", content="be brief")], reason="r")
            return None

    provider = FakeProvider(text("ok"))
    rec, history = await run(H(), provider)
    assert contents(provider.requests[0].messages) == ["hi", "be brief"]
    assert contents(history) == ["hi", "be brief", "ok"]
    assert rec.of("hook_action") == [
        {
            "hook": "pre_step",
            "action": "append",
            "reason": "r",
            "round": 1,
            "value": [{"role": "system", "content": "be brief"}],
        }
    ]
    assert rec.kinds().index("hook_action") < rec.kinds().index("stage_start")


async def test_pre_step_rewrite_changes_one_request_never_the_history():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            if ctx.round == 1:
                return Rewrite(messages=[Message(role="user", content="hi (short form)")])
            return None

    provider = FakeProvider(calls(("a", {})), text("done"))
    rec, history = await run(H(), provider)
    assert contents(provider.requests[0].messages) == ["hi (short form)"]
    # The next step sends the history again: the rewrite was for one request.
    assert contents(provider.requests[1].messages) == ["hi", "", "A"]
    assert contents(history) == ["hi", "", "A", "done"]
    [action] = rec.of("hook_action")
    assert (action["action"], action["value"]) == ("rewrite", {"messages": 1})


async def test_pre_step_rewrite_is_kept_for_the_steps_retries():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            return Rewrite(messages=[Message(role="user", content="rewritten")])

        def on_request_error(self, ctx, error, attempt):
            return Retry()

    provider = FakeProvider([ProviderError("flaky")], text("ok"))
    await run(H(), provider)
    assert [contents(r.messages) for r in provider.requests] == [["rewritten"], ["rewritten"]]


async def test_pre_step_compact_lasts_for_the_turn_and_history_keeps_everything():
    seen: list[list[str]] = []

    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            seen.append(contents(ctx.messages))
            if ctx.round == 2:
                summary = Message(role="user", content="summary: asked hi, a said A")
                return Compact(messages=[summary], reason="too long")
            return None

    provider = FakeProvider(calls(("a", {"i": 1})), calls(("a", {"i": 2})), text("done"))
    rec, history = await run(H(), provider)
    assert contents(provider.requests[1].messages) == ["summary: asked hi, a said A"]
    # Later steps: the summary, then what the history gained after the compaction.
    assert contents(provider.requests[2].messages) == ["summary: asked hi, a said A", "", "A"]
    assert seen[2] == ["summary: asked hi, a said A", "", "A"]  # hooks see the model's view
    assert contents(history) == ["hi", "", "A", "", "A", "done"]
    [action] = rec.of("hook_action")
    assert action["action"] == "compact" and action["reason"] == "too long"
    assert action["value"] == {"messages": 1, "replaced": 3}


async def test_pre_step_tool_choice_for_one_step():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            return ToolChoice(choice="a") if ctx.round == 1 else None

    provider = FakeProvider(calls(("a", {})), text("done"))
    rec, _ = await run(H(), provider)
    assert [r.tool_choice for r in provider.requests] == ["a", None]
    [action] = rec.of("hook_action")
    assert (action["action"], action["value"]) == ("tool_choice", "a")


async def test_tool_choice_is_not_sent_without_tools():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            return ToolChoice(choice="required")

    provider = FakeProvider(text("ok"))
    await run(H(), provider, FakeExecutor({}))
    assert provider.requests[0].tool_choice is None


async def test_a_hook_may_return_several_actions():
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            return [Append(messages=[Message(role="user", content="use a")]), ToolChoice()]

    provider = FakeProvider(text("ok"))
    rec, _ = await run(H(), provider)
    assert [a["action"] for a in rec.of("hook_action")] == ["append", "tool_choice"]
    assert provider.requests[0].tool_choice == "required"
    assert provider.requests[0].messages[-1].content == "use a"


@pytest.mark.parametrize(
    ("action", "detail"),
    [
        (Append(messages=[]), "returned append without messages"),
        (
            Append(messages=[Message(role="tool", tool_call_id="x", content="r")]),
            "returned append with a tool call or tool result",
        ),
        (
            Rewrite(messages=[Message(role="tool", tool_call_id="x", content="r")]),
            "returned rewrite with a tool result of no earlier call",
        ),
        (Compact(messages=["not a message"]), "returned compact with something that is not"),
        (ToolChoice(choice="no_such_tool"), "returned tool_choice that is not auto, none"),
    ],
)
async def test_malformed_pre_step_actions_fail_the_turn(action: Any, detail: str):
    class H(NoHooks):
        def pre_step(self, ctx: LoopContext):
            return action

    rec, history = await run(H(), FakeProvider(text("never")))
    error = rec.of("error")[0]
    assert error["phase"] == "hook" and error["message"].startswith(f"hook pre_step {detail}")
    assert check_stream(rec.events)["status"] == "failed"
    assert contents(history) == ["hi"]


# --- post_tool_result replace ---------------------------------------------------------------


async def test_post_tool_result_replace_is_what_client_and_model_see():
    class H(NoHooks):
        def post_tool_result(self, ctx, call: ToolCall, result: ToolResult):
            assert result.content == "secret=42"
            return Replace(result=ToolResult(success=True, content="[redacted]"), reason="pii")

    provider = FakeProvider(calls(("a", {})), text("done"))
    rec, history = await run(H(), provider, FakeExecutor({"a": ok("secret=42")}))
    kinds = rec.kinds()
    assert kinds.index("hook_action") < kinds.index("tool_call_result")
    assert rec.of("hook_action") == [
        {
            "hook": "post_tool_result",
            "action": "replace",
            "reason": "pii",
            "round": 1,
            "toolCallId": "call_0",
            "value": "[redacted]",
        }
    ]
    result = rec.of("tool_call_result")[0]
    assert result["resultPreview"] == "[redacted]" and result["replaced"] is True
    assert provider.requests[1].messages[-1].content == "[redacted]"
    assert "secret" not in str(rec.events) and "secret" not in str(history)


async def test_replace_turns_an_executor_failure_into_a_result():
    class Broken(FakeExecutor):
        async def execute(self, call, ctx):
            raise RuntimeError("internal")

    class H(NoHooks):
        def post_tool_result(self, ctx, call, result):
            assert not result.success
            return Replace(result=ToolResult(success=True, content="fallback"))

    rec, _ = await run(H(), FakeProvider(calls(("a", {})), text("done")), Broken({"a": ok()}))
    assert rec.of("tool_error") == []
    assert rec.of("tool_call_result")[0]["success"] is True
    assert check_stream(rec.events)["status"] == "completed"


async def test_replace_without_a_tool_result_is_a_hook_error():
    class H(NoHooks):
        def post_tool_result(self, ctx, call, result):
            return Replace(result="text")  # type: ignore[arg-type]

    rec, _ = await run(H(), FakeProvider(calls(("a", {})), text("done")))
    expected = "hook post_tool_result returned replace without a ToolResult"
    assert rec.of("error")[0]["message"] == expected
    assert check_stream(rec.events)["status"] == "failed"


# --- composition ----------------------------------------------------------------------------


class Recording(NoHooks):
    """A hook that returns ``actions[point]`` and notes that it was asked."""

    def __init__(self, name: str, asked: list[str], **actions: Any) -> None:
        self.name = name
        self.asked = asked
        self.actions = actions

    def _answer(self, point: str) -> Any:
        self.asked.append(f"{self.name}.{point}")
        return self.actions.get(point)

    def pre_step(self, ctx):
        return self._answer("pre_step")

    def post_tool_result(self, ctx, call, result):
        self.asked.append(f"{self.name} saw {result.content}")
        return self._answer("post_tool_result")

    def on_request_error(self, ctx, error, attempt):
        return self._answer("on_request_error")

    def before_completion(self, ctx, text):
        return self._answer("before_completion")

    def tool_made_progress(self, ctx, round_summary):
        return self._answer("tool_made_progress")


async def test_pre_step_hooks_in_order_and_the_first_reject_wins():
    asked: list[str] = []
    hooks = [
        Recording("one", asked, pre_step=Append(messages=[Message(role="user", content="x")])),
        Recording("two", asked, pre_step=Reject(reason="two says no")),
        Recording("three", asked, pre_step=Reject(reason="three says no")),
    ]
    provider = FakeProvider(text("never"))
    rec, history = await run(hooks, provider)
    assert asked == ["one.pre_step", "two.pre_step"]  # three is never asked
    assert [(a["action"], a["reason"]) for a in rec.of("hook_action")] == [
        ("append", ""),
        ("reject", "two says no"),
    ]
    terminal = check_stream(rec.events)
    assert (
        terminal["status"] == "failed" and terminal["reason"] == "rejected by pre_step: two says no"
    )
    assert provider.requests == []
    assert contents(history) == ["hi", "x"]


async def test_pre_step_later_hooks_see_earlier_ones_and_the_last_tool_choice_wins():
    class Sees(NoHooks):
        def pre_step(self, ctx):
            assert contents(ctx.messages) == ["compacted"]
            return ToolChoice(choice="none")

    first = Recording(
        "one",
        [],
        pre_step=[Compact(messages=[Message(role="user", content="compacted")]), ToolChoice()],
    )
    provider = FakeProvider(text("ok"))
    rec, _ = await run([first, Sees()], provider)
    assert provider.requests[0].tool_choice == "none"
    assert [a["action"] for a in rec.of("hook_action")] == ["compact", "tool_choice", "tool_choice"]


async def test_post_tool_result_threads_replacements_and_the_first_suspend_wins():
    asked: list[str] = []
    hooks = [
        Recording(
            "one",
            asked,
            post_tool_result=Replace(result=ToolResult(success=True, content="B")),
        ),
        Recording("two", asked, post_tool_result=Suspend(reason="review B")),
        Recording("three", asked, post_tool_result=[Continue(), Suspend(reason="later")]),
    ]
    rec, _ = await run(hooks, FakeProvider(calls(("a", {})), text("never")))
    assert [a for a in asked if "saw" in a or "post_tool_result" in a] == [
        "one saw A",
        "one.post_tool_result",
        "two saw B",
        "two.post_tool_result",
        "three saw B",
        "three.post_tool_result",
    ]
    assert [a["action"] for a in rec.of("hook_action")] == [
        "replace",
        "suspend",
        "continue",
        "suspend",
    ]
    terminal = check_stream(rec.events)
    assert terminal["status"] == "waiting_user" and terminal["reason"] == "review B"


async def test_on_request_error_the_first_retry_wins():
    hooks = [
        Recording("one", [], on_request_error=Fail()),
        Recording("two", [], on_request_error=Retry(delay_ms=1)),
        Recording("three", [], on_request_error=Retry(delay_ms=2)),
    ]
    rec, _ = await run(hooks, FakeProvider([ProviderError("flaky")], text("ok")))
    assert [(a["action"], a["delayMs"]) for a in rec.of("hook_action")] == [("retry", 1)]
    assert check_stream(rec.events)["status"] == "completed"


async def test_on_request_error_retries_are_capped():
    class Always(NoHooks):
        def on_request_error(self, ctx, error, attempt):
            return Retry()

    provider = FakeProvider([ProviderError("down")])
    rec, _ = await run(Always(), provider)
    assert len(provider.requests) == MAX_REQUEST_ATTEMPTS
    actions = rec.of("hook_action")
    assert [a["action"] for a in actions] == ["retry"] * (MAX_REQUEST_ATTEMPTS - 1) + ["fail"]
    gave_up = f"down (gave up after {MAX_REQUEST_ATTEMPTS} attempts)"
    assert actions[-1]["reason"] == gave_up and rec.of("error")[0]["message"] == gave_up
    assert check_stream(rec.events)["status"] == "failed"


async def test_before_completion_retry_beats_narrate_beats_accept():
    rounds: list[int] = []

    class Narrator(NoHooks):
        def __init__(self, tail: str) -> None:
            self.tail = tail

        def before_completion(self, ctx, text):
            return Narrate(text=self.tail)

    class RetryOnce(NoHooks):
        def before_completion(self, ctx, text):
            rounds.append(ctx.round)
            return Retry(message="check it") if len(rounds) == 1 else Accept()

    hooks = [Narrator(" [a]"), RetryOnce(), Narrator(" [b]")]
    provider = FakeProvider(text("first"), text("second"))
    rec, history = await run(hooks, provider)
    assert [(a["action"], a.get("value")) for a in rec.of("hook_action")] == [
        ("retry", "check it"),  # the narrations of round 1 are not applied
        ("narrate", " [a]"),  # round 2: no retry, so every narration, in hook order
        ("narrate", " [b]"),
    ]
    assert history[-1].content == "second [a] [b]"
    assert check_stream(rec.events)["status"] == "completed"


async def test_before_completion_accepts_are_announced_when_nothing_else_applies():
    hooks = [Recording("one", [], before_completion=Accept()), Recording("two", [])]
    rec, _ = await run(hooks, FakeProvider(text("x")))
    assert [a["action"] for a in rec.of("hook_action")] == ["accept"]


async def test_before_completion_retries_are_capped():
    class Never(NoHooks):
        def before_completion(self, ctx, text):
            return Retry(message="again")

    provider = FakeProvider(text("answer"))
    rec, history = await run(Never(), provider)
    assert len(provider.requests) == MAX_COMPLETION_RETRIES + 1
    actions = rec.of("hook_action")
    assert [a["action"] for a in actions] == ["retry"] * MAX_COMPLETION_RETRIES + ["accept"]
    assert actions[-1]["reason"] == f"retry limit reached ({MAX_COMPLETION_RETRIES} per turn)"
    terminal = check_stream(rec.events)
    assert terminal["status"] == "completed" and history[-1].content == "answer"


async def test_tool_made_progress_the_first_stop_wins():
    asked: list[str] = []
    hooks = [
        Recording("one", asked, tool_made_progress=Proceed()),
        Recording("two", asked, tool_made_progress=Stop(reason="circles")),
        Recording("three", asked, tool_made_progress=Stop(reason="never asked")),
    ]
    rec, _ = await run(hooks, FakeProvider(calls(("a", {})), text("never")))
    assert [a for a in asked if "progress" in a] == [
        "one.tool_made_progress",
        "two.tool_made_progress",
    ]
    assert [a["action"] for a in rec.of("hook_action")] == ["proceed", "stop"]
    assert check_stream(rec.events)["reason"] == "stopped: circles"


async def test_hooks_as_a_tuple_and_a_failing_tool_still_count():
    hooks = (Recording("one", []), Recording("two", []))
    config = LoopConfig(max_tool_errors=1)
    rec, _ = await run(
        hooks, FakeProvider(calls(("a", {})), text("x")), FakeExecutor({"a": failing()}), config
    )
    assert check_stream(rec.events)["status"] == "failed"
