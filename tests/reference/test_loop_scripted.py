"""The scripted provider: deterministic per conversation, one scenario per keyword."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopgate.contracts.messages import ToolSpec
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.providers import make_provider
from loopgate.gateway.reference.scripted import ScriptedProvider, plan_response, scenario_of
from loopgate.gateway.reference.tools import DemoTools
from loopgate.gateway.reference.types import ModelRequest
from tests.reference.loop_support import run_scripted, user

pytestmark = pytest.mark.anyio


def test_same_conversation_same_chunks_different_prompts_differ(tmp_path: Path):
    tools = DemoTools(tmp_path).specs()
    a1 = plan_response(ModelRequest(messages=user("What is the weather in Oslo?"), tools=tools))
    a2 = plan_response(ModelRequest(messages=user("What is the weather in Oslo?"), tools=tools))
    b = plan_response(ModelRequest(messages=user("Summarise chapter 3 of the book"), tools=tools))
    assert a1 == a2
    assert a1 != b


def test_scenario_keywords():
    assert scenario_of("please do ONE TOOL call") == "one tool"
    assert scenario_of("think, then one tool") == "one tool"
    assert scenario_of("hello there") == "default"


async def test_default_run_has_reasoning_text_and_two_parallel_tools(tmp_path: Path):
    rec, history, terminal = await run_scripted("What time is it, and what is 6 * 7?", tmp_path)
    assert terminal["status"] == "completed"
    assert rec.of("reasoning_delta") and rec.of("content_delta")
    first_round = [d for d in rec.of("tool_call_start") if d["round"] == 1]
    assert [d["name"] for d in first_round] == ["clock", "calculate"]
    assert first_round[1]["arguments"] == {"expression": "6 * 7"}
    calc = rec.of("tool_call_result")[1]["resultPreview"]
    assert calc == "42" and "6 * 7 = 42" in history[-1].content  # the answer uses the observation
    deltas = [d["delta"] for d in rec.of("content_delta")]
    assert len(deltas) > 10 and max(len(d) for d in deltas) <= 24


@pytest.mark.parametrize(
    ("prompt", "config", "expect"),
    [
        ("plain answer please", None, {"kinds_absent": ["reasoning_delta", "tool_call_start"]}),
        ("think hard", None, {"kinds": ["reasoning_delta"], "kinds_absent": ["tool_call_start"]}),
        ("one tool only", None, {"tools": ["calculate"]}),
        ("fail tool", None, {"tools": ["read_file"], "failed": 1}),
        ("slow tool", LoopConfig(tool_timeout_ms=50), {"tools": ["sleep"], "failed": 1}),
        ("forever", LoopConfig(max_rounds=3), {"status": "budget_exhausted"}),
        ("provider error", None, {"status": "failed", "kinds": ["error"]}),
        ("ask user", None, {"status": "waiting_user", "tools": ["ask_user"]}),
        ("unicode", None, {"kinds": ["content_delta"]}),
        ("big result", LoopConfig(persist_tool_results=True), {"tools": ["lorem"]}),
    ],
)
async def test_scenarios(tmp_path: Path, prompt: str, config, expect: dict):
    rec, _, terminal = await run_scripted(prompt, tmp_path, config)
    assert terminal["status"] == expect.get("status", "completed")
    kinds = set(rec.kinds())
    for kind in expect.get("kinds", []):
        assert kind in kinds
    for kind in expect.get("kinds_absent", []):
        assert kind not in kinds
    if "tools" in expect:
        assert [d["name"] for d in rec.of("tool_call_start")][: len(expect["tools"])] == expect[
            "tools"
        ]
    if "failed" in expect:
        assert sum(not r["success"] for r in rec.of("tool_call_result")) == expect["failed"]


async def test_unicode_deltas(tmp_path: Path):
    rec, _, _ = await run_scripted("unicode please", tmp_path)
    text = rec.text()
    assert "🚀" in text and "日本語" in text and "\n" in text
    assert any("\n" in d["delta"] for d in rec.of("content_delta"))


async def test_big_result_is_a_megabyte(tmp_path: Path):
    rec, _, _ = await run_scripted("big result", tmp_path, LoopConfig(persist_tool_results=True))
    assert len(rec.of("tool_call_result")[0]["result"]) == 1_000_000


async def test_provider_error_after_some_text(tmp_path: Path):
    rec, history, _ = await run_scripted("provider error", tmp_path)
    assert rec.of("content_delta")
    assert history[-1].content == rec.text()


async def test_client_tool(tmp_path: Path):
    spec = ToolSpec(name="show_chart", description="render a chart in the UI")
    rec, _, terminal = await run_scripted("client tool: chart it", tmp_path, client_tools=[spec])
    assert terminal["status"] == "waiting_user"
    assert terminal["pendingToolCallIds"] == [rec.of("tool_call_start")[0]["id"]]


async def test_wrap_up_round_without_tools_answers(tmp_path: Path):
    loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(tmp_path))
    req = ModelRequest(messages=user("forever"), tools=[])
    plan = plan_response(req)
    assert all(type(c).__name__ != "ToolCallChunk" for c in plan.chunks)
    assert loop.provider.name == "scripted"


def test_make_provider():
    provider = make_provider("scripted", delay_s=0, model="m")
    assert isinstance(provider, ScriptedProvider) and provider.model == "m"
    with pytest.raises(ValueError, match="unknown provider"):
        make_provider("nope")
    with pytest.raises(ValueError, match="needs base_url and model"):
        make_provider("openai", api_key="k")
    openai = make_provider(
        "openai", base_url="http://127.0.0.1:9/v1", model="m", delay_s=0.5, api_key=None
    )
    assert type(openai).__name__ == "OpenAIProvider" and openai.model == "m"


@pytest.mark.parametrize(
    ("prompt", "expression", "result"),
    [
        ("What time is it, and what is 25 * 16 + 2?", "25 * 16 + 2", "402"),
        ("one tool: what is 7*6?", "7 * 6", "42"),
        ("one tool: 10 / 4 - 1.5 please", "10 / 4 - 1.5", "1.0"),
    ],
)
async def test_the_demo_calculates_the_prompts_own_arithmetic(
    tmp_path: Path, prompt: str, expression: str, result: str
) -> None:
    rec, _, _ = await run_scripted(prompt, tmp_path)
    calls = [data for kind, data in rec.events if kind == "tool_call_start"]
    assert [c["arguments"] for c in calls if c["name"] == "calculate"] == [
        {"expression": expression}
    ]
    answer = "".join(data["delta"] for kind, data in rec.events if kind == "content_delta")
    assert f"{expression} = {result}" in answer or f"{expression} is {result}" in answer


@pytest.mark.parametrize(
    ("prompt", "tools"),
    [
        ("What time is it?", ["clock"]),
        ("and 25 * 16 + 2?", ["calculate"]),
        ("What is today's date, and 1.5 / 3?", ["clock", "calculate"]),
    ],
)
async def test_the_default_looks_up_only_what_the_prompt_asks(
    prompt: str, tools: list[str], tmp_path: Path
) -> None:
    rec, history, terminal = await run_scripted(prompt, tmp_path)
    assert terminal["status"] == "completed"
    assert [d["name"] for d in rec.of("tool_call_start")] == tools
    if "calculate" in tools:
        expected = {"and 25 * 16 + 2?": "25 * 16 + 2 = 402"}.get(prompt, "1.5 / 3 = 0.5")
        assert expected in history[-1].content


async def test_an_unmatched_prompt_is_told_what_the_model_is(tmp_path: Path) -> None:
    rec, history, terminal = await run_scripted("What is the capital of France?", tmp_path)
    assert terminal["status"] == "completed" and not rec.of("tool_call_start")
    answer = history[-1].content
    assert "scripted model" in answer and "--provider openai" in answer
    # Every keyword it offers is one it follows.
    for word in ("think", "one tool", "slow tool", "write note", "ask user", "plain"):
        assert word in answer and scenario_of(word) != "default"
