"""examples/pydantic_ai_agent.py: its ``loop`` driven like the gateway drives it."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta

import pytest
from pydantic_ai import ModelRetry

from examples.pydantic_ai_agent import calculate, loop
from tests.integrations.fake_context import FakeRunContext, collect, kinds, of_kind, text

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def test_loop_is_an_async_generator_function() -> None:
    assert inspect.isasyncgenfunction(loop)  # what `loopgate serve --loop` looks for


async def test_tools_then_an_answer_made_of_their_results() -> None:
    ctx = FakeRunContext("What time is it, and what is 25 * 16 + 2?")
    events = await collect(loop, ctx)
    calls = [(c["name"], c["arguments"]) for c in of_kind(events, "tool_call_start")]
    assert calls == [("clock", {}), ("calculate", {"expression": "25 * 16 + 2"})]
    results = {r["name"]: r for r in of_kind(events, "tool_call_result")}
    assert results["calculate"]["success"] and results["calculate"]["resultPreview"] == "402"
    now = results["clock"]["resultPreview"]
    assert abs(datetime.fromisoformat(now) - datetime.now(UTC)) < timedelta(minutes=1)
    assert text(events) == f"It is {now} (UTC), and 25 * 16 + 2 = 402."
    assert text(events, "reasoning_delta").startswith("This needs clock and calculate")
    assert kinds(events).count("stage_start") == 2
    assert events[-1].data["status"] == "completed" and events[-1].data["toolCallCount"] == 2


async def test_a_failed_calculation_is_reported_to_the_model() -> None:
    events = await collect(loop, FakeRunContext("what is 1 / 0"))
    result = of_kind(events, "tool_call_result")[0]
    assert result["success"] is False
    assert result["error"] == "cannot calculate '1 / 0': division by zero"
    assert text(events).startswith("Calculate failed (")
    assert events[-1].data["status"] == "completed"


async def test_a_question_without_tools() -> None:
    events = await collect(loop, FakeRunContext("hello"))
    assert "tool_call_start" not in kinds(events)
    assert text(events).startswith("I can tell the time and do arithmetic")


@pytest.mark.parametrize(
    ("expression", "value"), [("25 * 16 + 2", 402), ("-(7 - 10) // 2", 1), ("7 % 4 / 2", 1.5)]
)
def test_calculate(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize("expression", ["2 ** 100000", "__import__('os')", "1 +", "x"])
def test_calculate_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ModelRetry, match="cannot calculate"):
        calculate(expression)
