"""gateway/integrations/pydantic_ai/: a pydantic-ai Agent on a FunctionModel, driven through the
loop port with a fake run context; every stream is validated and ends with one terminal."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    BinaryContent,
    ImageUrl,
    ModelHTTPError,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    SystemPromptPart,
    TextPart,
    Tool,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

from loopgate.contracts import LoopEvent
from loopgate.gateway.integrations.pydantic_ai import pydantic_ai_loop, to_message_history
from tests.attachments.support import NOTES_B64, PNG_B64
from tests.integrations.fake_context import FakeRunContext, collect, kinds, of_kind, text

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

# Real timings and token estimates; the exact sequences below leave them out.
VOLATILE = {"elapsedMs", "durationMs", "promptTokens", "completionTokens", "totalTokens"}


class Block:
    """A point in a scripted response where the model hangs until its stream is torn down."""

    def __init__(self) -> None:
        self.reached = anyio.Event()
        self.closed = False


class Script:
    """A FunctionModel stream function: one scripted response per model request, in order (the
    last repeats). Items are deltas (str, thinking, tool calls), exceptions, or a ``Block``."""

    def __init__(self, *responses: list[Any]) -> None:
        self.responses = responses
        self.requests: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        self.requests.append(list(messages))
        self.infos.append(info)
        for item in self.responses[min(len(self.requests), len(self.responses)) - 1]:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, Block):
                try:
                    item.reached.set()
                    await anyio.sleep_forever()
                finally:
                    item.closed = True
            yield item


def think(delta: str) -> dict[int, DeltaThinkingPart]:
    return {0: DeltaThinkingPart(content=delta)}


def call(name: str, arguments: dict[str, Any], call_id: str, index: int = 1) -> dict[int, Any]:
    return {index: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}


def make_loop(script: Script, tools: list[Any] | None = None, **agent_kwargs: Any) -> Any:
    model = FunctionModel(stream_function=script, model_name="fake")
    return pydantic_ai_loop(Agent(model, tools=tools or [], **agent_kwargs))


def stable(events: list[LoopEvent]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, {k: v for k, v in e.data.items() if k not in VOLATILE}) for e in events]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_text_answer_with_reasoning() -> None:
    script = Script([think("Let me "), think("think."), "Hel", "lo"])
    events = await collect(make_loop(script), FakeRunContext("hi"))
    assert stable(events) == [
        ("stage_start", {"model": "fake", "round": 1}),
        ("llm_request", {"round": 1, "attempt": 1, "model": "fake"}),
        ("reasoning_delta", {"delta": "Let me "}),
        ("reasoning_delta", {"delta": "think."}),
        ("content_delta", {"delta": "Hel"}),
        ("content_delta", {"delta": "lo"}),
        ("llm_response", {"round": 1, "attempt": 1, "model": "fake", "finishReason": "stop"}),
        (
            "completion",
            {
                "status": "completed",
                "reason": "stop",
                "round": 1,
                "finishReason": "stop",
                "textLength": 5,
                "toolCalls": [],
                "toolCallCount": 0,
                "toolErrorCount": 0,
            },
        ),
    ]
    response, completion = events[-2].data, events[-1].data
    assert response["promptTokens"] > 0 and response["completionTokens"] > 0
    assert response["totalTokens"] == response["promptTokens"] + response["completionTokens"]
    assert completion["promptTokens"] == response["promptTokens"]
    assert completion["elapsedMs"] >= 0


async def test_tool_round() -> None:
    script = Script([call("add", {"a": 2, "b": 3}, "call_1")], ["2 + 3 = ", "5."])
    events = await collect(make_loop(script, [add]), FakeRunContext("What is 2 + 3?"))
    assert stable(events) == [
        ("stage_start", {"model": "fake", "round": 1}),
        ("llm_request", {"round": 1, "attempt": 1, "model": "fake"}),
        ("llm_response", {"round": 1, "attempt": 1, "model": "fake", "finishReason": "tool_calls"}),
        (
            "tool_call_start",
            {"id": "call_1", "name": "add", "round": 1, "arguments": {"a": 2, "b": 3}},
        ),
        (
            "tool_call_result",
            {"id": "call_1", "name": "add", "success": True, "resultPreview": "5"},
        ),
        ("stage_complete", {"round": 1, "toolCallCount": 1, "consecutiveToolErrors": 0}),
        (
            "completion",
            {
                "status": "executing",
                "reason": "tool_calls",
                "round": 1,
                "finishReason": "tool_calls",
                "textLength": 0,
                "toolCalls": ["add"],
                "toolCallCount": 1,
                "toolErrorCount": 0,
            },
        ),
        ("stage_start", {"model": "fake", "round": 2}),
        ("llm_request", {"round": 2, "attempt": 1, "model": "fake"}),
        ("content_delta", {"delta": "2 + 3 = "}),
        ("content_delta", {"delta": "5."}),
        ("llm_response", {"round": 2, "attempt": 1, "model": "fake", "finishReason": "stop"}),
        (
            "completion",
            {
                "status": "completed",
                "reason": "stop",
                "round": 2,
                "finishReason": "stop",
                "textLength": 10,
                "toolCalls": ["add"],
                "toolCallCount": 1,
                "toolErrorCount": 0,
            },
        ),
    ]
    assert events[4].data["durationMs"] > 0  # timed around the call
    # The model's second request carries the tool's result.
    returned = [p for p in script.requests[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_name, p.content, p.tool_call_id) for p in returned] == [("add", 5, "call_1")]
    # Tokens add up over the rounds.
    responses = of_kind(events, "llm_response")
    assert events[-1].data["promptTokens"] == sum(r["promptTokens"] for r in responses)


async def test_failed_tool_results_and_preview() -> None:
    def lookup(key: str) -> str:
        """Look a key up."""
        if key == "missing":
            raise ModelRetry("no such key: missing")
        return "x" * 1000

    script = Script(
        [
            call("lookup", {"key": "missing"}, "call_1", 1),
            call("lookup", {"key": "big"}, "call_2", 2),
        ],
        ["done"],
    )
    loop = make_loop(script, [Tool(lookup, max_retries=3)])
    events = await collect(loop, FakeRunContext("look"))
    # pydantic-ai runs the two calls at once: results come in the order they finish.
    results = {r["id"]: r for r in of_kind(events, "tool_call_result")}
    failed, big = results["call_1"], results["call_2"]
    assert failed["success"] is False and failed["error"] == "no such key: missing"
    assert failed["resultPreview"] == "no such key: missing"
    assert big["success"] is True and big["resultPreview"] == "x" * 300 + "…"
    # Consecutive errors count in the order the results arrived: 1 if the failure came last.
    last_failed = not of_kind(events, "tool_call_result")[-1]["success"]
    assert of_kind(events, "stage_complete")[0]["consecutiveToolErrors"] == int(last_failed)
    assert events[-1].data["status"] == "completed" and events[-1].data["toolErrorCount"] == 1


async def test_persisted_tool_results() -> None:
    script = Script([call("add", {"a": 2, "b": 3}, "call_1")], ["5"])
    ctx = FakeRunContext("add", config={"persist_tool_results": True})
    events = await collect(make_loop(script, [add]), ctx)
    assert of_kind(events, "tool_call_result")[0]["result"] == 5


async def test_a_tool_that_raises_fails_the_run_without_internals() -> None:
    def explode() -> str:
        """Fail."""
        raise RuntimeError("password=hunter2 at /srv/secret.py")

    script = Script([call("explode", {}, "call_1")])
    events = await collect(make_loop(script, [explode]), FakeRunContext("go"))
    assert stable(events)[3:] == [
        ("tool_call_start", {"id": "call_1", "name": "explode", "round": 1, "arguments": {}}),
        (
            "tool_error",
            {"id": "call_1", "name": "explode", "error": "explode failed with an internal error"},
        ),
        ("error", {"message": "the tool explode failed", "round": 1, "phase": "tool"}),
        (
            "completion",
            {
                "status": "failed",
                "reason": "tool_error",
                "round": 1,
                "finishReason": "tool_calls",
                "textLength": 0,
                "toolCalls": ["explode"],
                "toolCallCount": 1,
                "toolErrorCount": 1,
            },
        ),
    ]
    assert "hunter2" not in repr(events) and "secret" not in repr(events)


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (RuntimeError("connection to db://admin:hunter2@10.0.0.7 lost"), "the agent failed"),
        (
            ModelHTTPError(503, "fake", body={"key": "hunter2"}),
            "the model request failed (HTTP 503)",
        ),
    ],
)
async def test_model_error(failure: Exception, message: str) -> None:
    script = Script(["Let me ", failure])
    events = await collect(make_loop(script), FakeRunContext("hi"))
    assert stable(events) == [
        ("stage_start", {"model": "fake", "round": 1}),
        ("llm_request", {"round": 1, "attempt": 1, "model": "fake"}),
        ("content_delta", {"delta": "Let me "}),
        ("llm_response", {"round": 1, "attempt": 1, "error": message}),
        ("error", {"message": message, "round": 1, "phase": "llm_stream"}),
        (
            "completion",
            {
                "status": "failed",
                "reason": "provider_error",
                "round": 1,
                "textLength": 7,
                "toolCalls": [],
                "toolCallCount": 0,
                "toolErrorCount": 0,
            },
        ),
    ]
    assert "hunter2" not in repr(events)


class PollingOnlyContext(FakeRunContext):
    """A context whose cancel shows only in ``cancelled``: the loop must look between events."""

    async def wait_cancelled(self) -> None:
        await anyio.sleep_forever()


@pytest.mark.parametrize("context", [FakeRunContext, PollingOnlyContext])
async def test_cancel_between_events(context: type[FakeRunContext]) -> None:
    script = Script(["one ", "two ", "three ", "four"])
    ctx = context("count")
    deltas: list[LoopEvent] = []

    def cancel_at_the_second_delta(event: LoopEvent) -> None:
        if event.kind == "content_delta":
            deltas.append(event)
            if len(deltas) == 2:
                ctx.cancel()

    events = await collect(make_loop(script), ctx, cancel_at_the_second_delta)
    assert kinds(events) == [
        "stage_start",
        "llm_request",
        "content_delta",
        "content_delta",
        "completion",
    ]
    assert events[-1].data["status"] == "cancelled" and events[-1].data["reason"] == "cancelled"
    assert events[-1].data["textLength"] == len("one two ")


async def test_cancel_interrupts_a_model_that_hangs() -> None:
    block = Block()
    script = Script(["Hel", block, "lo"])
    ctx = FakeRunContext("hi")

    async def cancel_when_blocked() -> None:
        await block.reached.wait()
        ctx.cancel()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_blocked)
            events = await collect(make_loop(script), ctx)
    assert stable(events) == [
        ("stage_start", {"model": "fake", "round": 1}),
        ("llm_request", {"round": 1, "attempt": 1, "model": "fake"}),
        ("content_delta", {"delta": "Hel"}),
        (
            "completion",
            {
                "status": "cancelled",
                "reason": "cancelled",
                "round": 1,
                "textLength": 3,
                "toolCalls": [],
                "toolCallCount": 0,
                "toolErrorCount": 0,
            },
        ),
    ]
    assert block.closed  # pydantic-ai tore the model's stream down


async def test_cancel_during_a_tool() -> None:
    started = anyio.Event()
    stopped: list[bool] = []

    async def wait_forever() -> str:
        """Never returns."""
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            stopped.append(True)
        return "unreachable"

    ctx = FakeRunContext("wait")

    async def cancel_when_started() -> None:
        await started.wait()
        ctx.cancel()

    script = Script([call("wait_forever", {}, "call_1")])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_started)
            events = await collect(make_loop(script, [wait_forever]), ctx)
    assert kinds(events)[-2:] == ["tool_call_start", "completion"]
    assert events[-1].data["status"] == "cancelled"
    assert events[-1].data["toolCalls"] == ["wait_forever"]
    assert stopped == [True]


async def test_closing_the_generator_stops_the_agent() -> None:
    block = Block()
    loop = make_loop(Script(["Hel", block]))
    events = loop(FakeRunContext("hi"))
    with anyio.fail_after(10):
        while (await anext(events)).kind != "content_delta":
            pass
        await block.reached.wait()
        await events.aclose()
    assert block.closed


def summary(messages: list[ModelMessage]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The parts of a pydantic-ai history that matter here, without timestamps."""
    out = []
    for message in messages:
        parts: list[tuple[Any, ...]] = []
        for part in message.parts:
            if isinstance(part, SystemPromptPart | UserPromptPart | TextPart):
                parts.append((type(part).__name__, part.content))
            elif isinstance(part, ToolCallPart):
                parts.append(
                    ("ToolCallPart", part.tool_name, part.args_as_dict(), part.tool_call_id)
                )
            elif isinstance(part, ToolReturnPart):
                parts.append(("ToolReturnPart", part.tool_name, part.content, part.tool_call_id))
        out.append((type(message).__name__, parts))
    return out


THREAD = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Book a table for two."},
    {
        "role": "assistant",
        "content": "Checking.",
        "reasoning": "they want a booking",
        "tool_calls": [{"id": "call_9", "name": "confirm_booking", "arguments": {"seats": 2}}],
    },
    {"role": "tool", "tool_call_id": "call_9", "content": "confirmed"},
    {"role": "assistant", "content": "Booked."},
]


async def test_message_history_reaches_the_model() -> None:
    script = Script(["You're welcome."])
    await collect(make_loop(script), FakeRunContext("Thanks!", messages=THREAD))
    assert summary(script.requests[0]) == [
        (
            "ModelRequest",
            [("SystemPromptPart", "Be brief."), ("UserPromptPart", "Book a table for two.")],
        ),
        (
            "ModelResponse",
            [
                ("TextPart", "Checking."),
                ("ToolCallPart", "confirm_booking", {"seats": 2}, "call_9"),
            ],
        ),
        ("ModelRequest", [("ToolReturnPart", "confirm_booking", "confirmed", "call_9")]),
        ("ModelResponse", [("TextPart", "Booked.")]),
        ("ModelRequest", [("UserPromptPart", "Thanks!")]),
    ]


def test_to_message_history_keeps_names_given_and_drops_reasoning() -> None:
    history = to_message_history(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "name": "clock", "arguments": {}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "renamed", "content": "noon"},
            {"role": "assistant", "content": "", "reasoning": "nothing to say"},
        ]
    )
    assert summary(history) == [
        ("ModelRequest", [("UserPromptPart", "hi")]),
        ("ModelResponse", [("ToolCallPart", "clock", {}, "c1")]),
        ("ModelRequest", [("ToolReturnPart", "renamed", "noon", "c1")]),
    ]
    assert all(isinstance(m, ModelRequest | ModelResponse) for m in history)


async def test_a_turn_that_continues_after_a_client_tool_result() -> None:
    script = Script(["Your table is booked."])
    ctx = FakeRunContext("", messages=THREAD[1:4])
    events = await collect(make_loop(script), ctx)
    assert summary(script.requests[0])[-1] == (
        "ModelRequest",
        [("ToolReturnPart", "confirm_booking", "confirmed", "call_9")],
    )
    assert text(events) == "Your table is booked." and events[-1].data["status"] == "completed"


CONFIRM = {
    "name": "confirm_booking",
    "description": "Ask the user to confirm a booking.",
    "parameters": {
        "type": "object",
        "properties": {"seats": {"type": "integer"}},
        "required": ["seats"],
    },
}


async def test_client_tools_end_the_turn_waiting_for_the_client() -> None:
    script = Script(
        [
            call("confirm_booking", {"seats": 2}, "call_1", 1),
            call("add", {"a": 1, "b": 1}, "call_2", 2),
        ]
    )
    ctx = FakeRunContext("Book for two", tools=[CONFIRM])
    events = await collect(make_loop(script, [add]), ctx)
    offered = {t.name: t for t in script.infos[0].function_tools}
    assert set(offered) == {"add", "confirm_booking"}
    assert offered["confirm_booking"].description == CONFIRM["description"]
    assert offered["confirm_booking"].parameters_json_schema == CONFIRM["parameters"]
    assert stable(events)[3:] == [
        (
            "tool_call_start",
            {"id": "call_2", "name": "add", "round": 1, "arguments": {"a": 1, "b": 1}},
        ),
        (
            "tool_call_result",
            {"id": "call_2", "name": "add", "success": True, "resultPreview": "2"},
        ),
        (
            "tool_call_start",
            {"id": "call_1", "name": "confirm_booking", "round": 1, "arguments": {"seats": 2}},
        ),
        ("stage_complete", {"round": 1, "toolCallCount": 2, "consecutiveToolErrors": 0}),
        (
            "completion",
            {
                "status": "waiting_user",
                "reason": "client_tool",
                "round": 1,
                "finishReason": "tool_calls",
                "textLength": 0,
                "toolCalls": ["add", "confirm_booking"],
                "toolCallCount": 2,
                "toolErrorCount": 0,
                "pendingToolCallIds": ["call_1"],
            },
        ),
    ]
    assert len(script.requests) == 1  # the client answers in the next turn


async def test_steering_waits_for_the_next_turn_when_a_client_tool_ends_this_one() -> None:
    script = Script([call("confirm_booking", {"seats": 2}, "call_1")])
    ctx = FakeRunContext("Book for two", tools=[CONFIRM])

    def steer_in_round_one(event: LoopEvent) -> None:
        if event.kind == "llm_request":
            ctx.steer("make it three")

    events = await collect(make_loop(script), ctx, steer_in_round_one)
    assert "steer" not in kinds(events)
    assert events[-1].data["status"] == "waiting_user"
    assert ctx.take_steers() == ["make it three"]  # still the gateway's, not lost


async def test_client_tools_can_be_left_out() -> None:
    script = Script(["no tools"])
    model = FunctionModel(stream_function=script, model_name="fake")
    loop = pydantic_ai_loop(Agent(model), client_tools=False)
    await collect(loop, FakeRunContext("hi", tools=[CONFIRM]))
    assert script.infos[0].function_tools == []


async def test_an_agent_with_output_validators_cannot_take_client_tools() -> None:
    agent = Agent(FunctionModel(stream_function=Script(["ok"]), model_name="fake"))

    @agent.output_validator
    def keep(output: str) -> str:
        return output

    events = await collect(pydantic_ai_loop(agent), FakeRunContext("hi", tools=[CONFIRM]))
    assert of_kind(events, "error") == [{"message": "the agent failed", "phase": "loop"}]
    assert events[-1].data["status"] == "failed"
    events = await collect(pydantic_ai_loop(agent, client_tools=False), FakeRunContext("hi"))
    assert events[-1].data["status"] == "completed"


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def approval_run(decisions: list[str], approval: str = "auto", needs_approval: bool = True):
    script = Script([call("delete_file", {"path": "a.txt"}, "call_1")], ["ok"])
    tool = Tool(delete_file, requires_approval=needs_approval)
    ctx = FakeRunContext("delete a.txt", decisions=decisions, approval=approval)  # type: ignore[arg-type]
    events = await collect(make_loop(script, [tool]), ctx)
    return ctx, script, events


async def test_approved_tool_call() -> None:
    ctx, _, events = await approval_run(["allow_once"])
    assert ctx.permission_requests == [
        {"id": "call_1", "name": "delete_file", "arguments": {"path": "a.txt"}}
    ]
    result = of_kind(events, "tool_call_result")[0]
    assert result["success"] is True and result["resultPreview"] == "deleted a.txt"
    assert kinds(events).index("tool_call_start") < kinds(events).index("tool_call_result")


async def test_rejected_tool_call() -> None:
    ctx, script, events = await approval_run(["reject_once"])
    assert len(ctx.permission_requests) == 1
    result = of_kind(events, "tool_call_result")[0]
    assert result["success"] is False and result["error"] == "rejected by the user"
    denied = [p for p in script.requests[1][-1].parts if isinstance(p, ToolReturnPart)]
    assert [p.outcome for p in denied] == ["denied"]
    assert events[-1].data["status"] == "completed"


async def test_approval_never_and_always() -> None:
    ctx, _, events = await approval_run([], approval="never")
    assert ctx.permission_requests == [] and of_kind(events, "tool_call_result")[0]["success"]
    ctx, _, events = await approval_run(["allow_always"], approval="always", needs_approval=False)
    assert [r["name"] for r in ctx.permission_requests] == ["delete_file"]
    assert of_kind(events, "tool_call_result")[0]["success"]


async def test_steering_before_the_first_round() -> None:
    script = Script(["ok"])
    ctx = FakeRunContext("Summarise the report")
    ctx.steer("only the first page")
    events = await collect(make_loop(script), ctx)
    assert kinds(events)[:2] == ["steer", "stage_start"]
    assert events[0].data == {"content": "only the first page", "round": 1}
    prompts = [p.content for p in script.requests[0][-1].parts if isinstance(p, UserPromptPart)]
    assert prompts == ["Summarise the report", "only the first page"]


async def test_steering_during_a_tool_round() -> None:
    ctx = FakeRunContext("What is 2 + 3?")

    def add_and_steer(a: int, b: int) -> int:
        """Add, while the user steers."""
        ctx.steer("answer in French")
        return a + b

    script = Script([call("add_and_steer", {"a": 2, "b": 3}, "call_1")], ["cinq"])
    events = await collect(make_loop(script, [add_and_steer]), ctx)
    assert stable(events)[6:9] == [
        ("completion", of_kind(events, "completion")[0]),
        ("steer", {"content": "answer in French", "round": 2}),
        ("stage_start", {"model": "fake", "round": 2}),
    ]
    assert of_kind(events, "completion")[0]["status"] == "executing"
    last = script.requests[1][-1].parts
    assert [type(p).__name__ for p in last] == ["ToolReturnPart", "UserPromptPart"]
    assert last[1].content == "answer in French"


async def test_steering_while_answering_asks_the_model_again() -> None:
    script = Script(["A long answer"], ["Short."])
    ctx = FakeRunContext("Explain")

    def steer_at_first_delta(event: LoopEvent) -> None:
        if event.kind == "content_delta" and event.data["delta"] == "A long answer":
            ctx.steer("shorter")

    events = await collect(make_loop(script), ctx, steer_at_first_delta)
    assert kinds(events) == [
        "stage_start",
        "llm_request",
        "content_delta",
        "llm_response",
        "steer",
        "stage_start",
        "llm_request",
        "content_delta",
        "llm_response",
        "completion",
    ]
    assert of_kind(events, "steer") == [{"content": "shorter", "round": 2}]
    assert text(events) == "A long answerShort."
    assert events[-1].data["status"] == "completed" and events[-1].data["round"] == 2
    assert summary(script.requests[1])[-1] == ("ModelRequest", [("UserPromptPart", "shorter")])


async def test_max_rounds_from_the_run_config() -> None:
    script = Script([call("add", {"a": 1, "b": 1}, "call_1")])
    ctx = FakeRunContext("loop", config={"max_rounds": 1})
    events = await collect(make_loop(script, [add]), ctx)
    assert stable(events)[-4:] == [
        ("stage_start", {"model": "fake", "round": 2}),
        ("llm_request", {"round": 2, "attempt": 1, "model": "fake"}),
        ("llm_response", {"round": 2, "attempt": 1, "error": "usage limit exceeded"}),
        (
            "completion",
            {
                "status": "budget_exhausted",
                "reason": "usage limit exceeded",
                "round": 2,
                "finishReason": "tool_calls",
                "textLength": 0,
                "toolCalls": ["add"],
                "toolCallCount": 1,
                "toolErrorCount": 0,
            },
        ),
    ]
    assert len(script.requests) == 1


async def test_config_reaches_the_model_settings() -> None:
    script = Script(["ok"])
    await collect(
        make_loop(script), FakeRunContext("hi", config={"temperature": 0.2, "max_tokens": 50})
    )
    settings = script.infos[0].model_settings or {}
    assert (settings.get("temperature"), settings.get("max_tokens")) == (0.2, 50)


class Point(BaseModel):
    x: int
    y: int


async def test_structured_output_is_sent_as_json_text() -> None:
    script = Script([call("final_result", {"x": 1, "y": 2}, "call_1")])
    events = await collect(make_loop(script, output_type=Point), FakeRunContext("a point"))
    assert json.loads(text(events)) == {"x": 1, "y": 2}
    assert "tool_call_start" not in kinds(events)  # the output tool is not a tool call to show
    assert events[-1].data["status"] == "completed"


async def test_attachments_reach_the_model_as_pydantic_ai_content() -> None:
    """The new prompt's parts and an earlier message's become BinaryContent / ImageUrl: the
    bytes as the client sent them (docs/attachments.md)."""
    png = base64.b64decode(PNG_B64)
    image = {"type": "image", "media_type": "image/png", "data": PNG_B64}
    earlier = {"role": "user", "content": [{"type": "text", "text": "first"}, image]}
    script = Script(["ok"])
    ctx = FakeRunContext(
        "see",
        input_parts=[
            {"type": "text", "text": "see"},
            {"type": "image", "url": "https://example.com/cat.jpg"},
            {"type": "file", "media_type": "text/plain", "data": NOTES_B64},
        ],
        messages=[earlier, {"role": "assistant", "content": "noted"}],
    )
    loop = make_loop(script)
    assert loop.accepts == {"image", "audio", "file", "resource"}
    await collect(loop, ctx)
    [request] = script.requests
    prompts = [p.content for m in request for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == [
        ["first", BinaryContent(data=png, media_type="image/png")],
        [
            "see",
            ImageUrl(url="https://example.com/cat.jpg"),
            BinaryContent(data=base64.b64decode(NOTES_B64), media_type="text/plain"),
        ],
    ]
