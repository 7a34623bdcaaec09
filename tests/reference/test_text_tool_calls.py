"""Text tool calls and reasoning from local models, end to end: transcripts in the formats real
models stream when their server has no tool or reasoning parser (tests/fakes/transcripts/),
served by the fake OpenAI-compatible server on a real socket, read by the real provider and
run by the reference loop — and, through the gateway with telemetry on, a tool span."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopgate.contracts.messages import Message
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.cli import build_parser
from loopgate.gateway.plugs.build import provider_from_settings
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.openai import OpenAIProvider
from loopgate.gateway.reference.text_tags import TextToolsMode
from loopgate.gateway.reference.types import ToolCallChunk
from loopgate.gateway.settings import Settings, load_settings
from loopgate.gateway.telemetry import Telemetry
from tests.fakes.openai_server import TRANSCRIPTS, FakeOpenAI
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    check_stream,
    ok,
    user,
)

pytestmark = pytest.mark.anyio

WEATHER = "Paris: sunny, 22 C"


class Turn:
    """One turn's events, and what they add up to."""

    def __init__(self, rec: Recorder, history: list[Message], executor: FakeExecutor) -> None:
        self.rec = rec
        self.history = history
        self.executor = executor
        self.terminal = check_stream(rec.events)

    def content(self) -> str:
        return "".join(d["delta"] for d in self.rec.of("content_delta"))

    def reasoning(self) -> str:
        return "".join(d["delta"] for d in self.rec.of("reasoning_delta"))

    def starts(self) -> list[tuple[str, dict[str, Any]]]:
        return [(d["name"], d["arguments"]) for d in self.rec.of("tool_call_start")]

    def results(self) -> list[dict[str, Any]]:
        return self.rec.of("tool_call_result")


async def turn(base_url: str, transcript: str, mode: TextToolsMode = "auto") -> Turn:
    provider = OpenAIProvider(base_url, f"transcript-{transcript}", text_tools=mode)
    executor = FakeExecutor({"get_weather": ok(WEATHER), "write_note": ok("saved")})
    loop = CoreLoop(provider, executor, LoopConfig(max_rounds=4))
    rec = Recorder()
    with anyio.fail_after(20):
        history = await loop.run_turn(user("What's the weather in Paris?"), rec)
    return Turn(rec, history, executor)


def test_the_transcripts_are_the_formats_of_real_models() -> None:
    """The fixtures hold what the tests below need: each family, each failure."""
    tags = {
        name: "".join(t.text(i) for i in range(len(t.replies))) for name, t in TRANSCRIPTS.items()
    }
    assert sum("<tool_call>" in text for text in tags.values()) >= 7
    assert sum("<think>" in text for text in tags.values()) >= 3
    assert "<think>" not in tags["deepseek-r1-distill-open"]
    assert "</think>" in tags["deepseek-r1-distill-open"]
    # Special tags arrive as one token, the rest in token-sized deltas.
    for t in TRANSCRIPTS.values():
        for reply in t.replies:
            assert max(len(d) for d in reply.content) <= 40


# --- the formats --------------------------------------------------------------------------


async def test_qwen25_hermes_tool_call_runs_the_tool(fake: FakeOpenAI, base_url: str) -> None:
    t = await turn(base_url, "qwen25-hermes-tool-call")
    assert t.starts() == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    [result] = t.results()
    assert result["success"] and result["resultPreview"] == WEATHER
    assert t.content() == "The weather in Paris is sunny, 22 °C."
    assert t.terminal["status"] == "completed" and t.terminal["toolCallCount"] == 1
    # The call went back to the model as a native call with a fresh id, answered by that id.
    call_id = t.rec.of("tool_call_start")[0]["id"]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call_id)
    second = fake.requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["id"] == call_id
    assert second[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert second[-1] == {"role": "tool", "tool_call_id": call_id, "content": WEATHER}
    assert second[-2]["content"] is None  # no tag text left over as the assistant's content


async def test_two_calls_in_one_reply_with_text_before_them(base_url: str) -> None:
    t = await turn(base_url, "qwen25-hermes-parallel")
    assert t.starts() == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]
    assert [r["success"] for r in t.results()] == [True, True]
    assert t.content() == "I'll check both cities.\nParis is sunny and Oslo is rainy."
    assert len({d["id"] for d in t.rec.of("tool_call_start")}) == 2


async def test_hermes_2_pro_writes_arguments_before_the_name(base_url: str) -> None:
    t = await turn(base_url, "hermes2pro-arguments-first")
    assert t.starts() == [("get_weather", {"city": "Paris"})]
    assert t.content() == "It is sunny in Paris today."


async def test_qwen3_thinks_then_calls_then_thinks_then_answers(base_url: str) -> None:
    t = await turn(base_url, "qwen3-think-tool-call")
    assert t.starts() == [("get_weather", {"city": "Paris"})]
    assert t.reasoning().startswith("The user wants the weather in Paris.")
    assert "The tool says sunny" in t.reasoning()
    assert t.content() == "It's sunny in Paris, 22 °C."
    assert "<" not in t.content() + t.reasoning()
    # Reasoning streams before the round's tool call, as a native reasoning model's does.
    kinds = t.rec.kinds()
    assert kinds.index("reasoning_delta") < kinds.index("tool_call_start")
    [first, final] = [m for m in t.history if m.role == "assistant"]
    assert first.reasoning and first.tool_calls and not first.content
    assert final.content == "It's sunny in Paris, 22 °C." and final.reasoning


async def test_server_reasoning_content_is_honoured_next_to_text_tool_calls(
    base_url: str,
) -> None:
    t = await turn(base_url, "qwen3-reasoning-parser-only")
    assert t.reasoning() == (
        "The user wants the weather in Paris, so I call get_weather.The tool answered; summarise."
    )
    assert t.starts() == [("get_weather", {"city": "Paris"})]
    assert t.content() == "It's sunny in Paris."  # the "\n\n" before the tag is not an answer


async def test_qwen3_without_thinking_leaves_no_trace_of_the_empty_think(base_url: str) -> None:
    t = await turn(base_url, "qwen3-no-think")
    assert t.rec.of("reasoning_delta") == []
    assert t.content() == "Hello! How can I help you today?"
    assert t.terminal["status"] == "completed"


async def test_deepseek_r1_distill_writing_its_own_think(base_url: str) -> None:
    t = await turn(base_url, "deepseek-r1-distill-think")
    assert t.reasoning().startswith("Okay, so I need to add 2 and 2.")
    assert t.content() == "The answer is **4**."


async def test_deepseek_r1_distill_whose_template_opens_the_think_block(base_url: str) -> None:
    on = await turn(base_url, "deepseek-r1-distill-open", "on")
    assert on.reasoning().startswith("Okay, so I need to add 2 and 2.")
    assert on.content() == "The answer is **4**."
    # Without "on" nothing says the reply began inside a think block: it streams as text.
    auto = await turn(base_url, "deepseek-r1-distill-open")
    assert auto.rec.of("reasoning_delta") == []
    assert auto.content().startswith("Okay, so") and "</think>" in auto.content()


async def test_an_unclosed_tool_call_is_recovered_and_runs(base_url: str) -> None:
    t = await turn(base_url, "qwen25-unclosed-tool-call")
    assert t.starts() == [("get_weather", {"city": "Paris"})]
    assert t.results()[0]["success"] is True
    assert t.content() == "Sunny in Paris."


async def test_a_tool_call_beyond_repair_is_a_failed_tool_result(base_url: str) -> None:
    t = await turn(base_url, "qwen25-malformed-tool-call")
    [start] = t.rec.of("tool_call_start")
    assert start["rawArguments"] == 'get_weather(city="Paris")'
    [result] = t.results()
    assert result["success"] is False and result["error"] == "the tool call has no name"
    assert t.executor.executed == []
    # The model saw the error and answered: the turn goes on, as for a native bad call.
    assert t.content() == "Sorry, I could not get the weather."
    assert t.terminal["status"] == "completed" and t.terminal["toolErrorCount"] == 1


async def test_a_tool_call_cut_off_at_the_token_limit_is_not_run(base_url: str) -> None:
    t = await turn(base_url, "qwen25-truncated-tool-call")
    [start] = t.rec.of("tool_call_start")
    assert start["name"] == "write_note" and start["arguments"] == {}
    assert start["rawArguments"].endswith('"Dear team, the quarterly')
    [result] = t.results()
    assert result["success"] is False
    assert result["error"].startswith("invalid JSON arguments")
    assert t.executor.executed == []


async def test_bad_arguments_fail_as_a_native_calls_do() -> None:
    """The same arguments text as a native tool call: the same failed result."""
    raw = '{"name": "get_weather", "arguments": {"text": "Dear team, the quarterly'
    native = FakeProvider(
        [ToolCallChunk(index=0, id="c", name="write_note", arguments=raw)], [], []
    )
    executor = FakeExecutor({"write_note": ok()})
    rec = Recorder()
    await CoreLoop(native, executor, LoopConfig(max_rounds=1)).run_turn(user("hi"), rec)
    [native_result] = rec.of("tool_call_result")
    assert native_result["success"] is False
    assert native_result["error"].startswith("invalid JSON arguments")


async def test_an_empty_think_and_nothing_else_fails_the_turn(base_url: str) -> None:
    t = await turn(base_url, "qwen3-empty-think-only")
    assert t.rec.of("content_delta") == [] and t.rec.of("reasoning_delta") == []
    assert t.terminal["status"] == "failed" and t.terminal["reason"] == "empty_response"
    [error] = t.rec.of("error")
    assert error["message"] == "the model's reply had no answer and no tool call (nothing)"
    assert error["phase"] == "llm_response"


async def test_with_text_tools_off_the_tags_are_plain_content(base_url: str) -> None:
    t = await turn(base_url, "qwen25-hermes-tool-call", "off")
    assert t.rec.of("tool_call_start") == []
    assert t.content() == "".join(TRANSCRIPTS["qwen25-hermes-tool-call"].replies[0].content)
    assert t.terminal["status"] == "completed"


# --- the same text, any chunking: the same events ---------------------------------------------

SPLIT_TEXT = (
    "<think>\nWeather <b>now</b>?\n</think>\n\nLet me look.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
)


def comparable(rec: Recorder) -> list[tuple[str, Any]]:
    """The events with deltas merged, ids numbered in order, times left out."""
    ids: dict[str, int] = {}
    out: list[tuple[str, Any]] = []
    for kind, data in rec.events:
        if kind in ("content_delta", "reasoning_delta"):
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + data["delta"])
            else:
                out.append((kind, data["delta"]))
            continue
        kept = {k: v for k, v in data.items() if not k.endswith("Ms")}
        if "id" in kept and kind.startswith("tool_"):
            kept["id"] = ids.setdefault(kept["id"], len(ids))
        out.append((kind, kept))
    return out


async def split_turn(
    base_url: str, parts: list[str], client: httpx.AsyncClient
) -> list[tuple[str, Any]]:
    provider = OpenAIProvider(base_url, "parts", client=client)
    executor = FakeExecutor({"get_weather": ok(WEATHER)})
    rec = Recorder()
    with anyio.fail_after(20):
        await CoreLoop(provider, executor).run_turn(user(json.dumps(parts)), rec)
    check_stream(rec.events)
    return comparable(rec)


async def test_every_split_of_a_reply_gives_the_same_events(base_url: str) -> None:
    async with httpx.AsyncClient() as client:
        whole = await split_turn(base_url, [SPLIT_TEXT], client)
        kinds = [kind for kind, _ in whole]
        assert kinds.count("reasoning_delta") == 1 and kinds.count("tool_call_start") == 1
        for at in range(1, len(SPLIT_TEXT)):
            split = await split_turn(base_url, [SPLIT_TEXT[:at], SPLIT_TEXT[at:]], client)
            assert split == whole, at


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.integers(1, len(SPLIT_TEXT) - 1), min_size=2, max_size=30, unique=True))
def test_random_multi_splits_give_the_same_events(base_url: str, cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(SPLIT_TEXT)]
    parts = [SPLIT_TEXT[a:b] for a, b in itertools.pairwise(bounds)]

    async def both() -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        async with httpx.AsyncClient() as client:
            return (
                await split_turn(base_url, parts, client),
                await split_turn(base_url, [SPLIT_TEXT], client),
            )

    split, whole = anyio.run(both)
    assert split == whole


# --- the setting, and the trace ---------------------------------------------------------------


def test_the_setting_from_env_and_flag_reaches_the_provider() -> None:
    model = {"provider": "openai", "openai_base_url": "http://127.0.0.1:9/v1",
             "openai_model": "m"}  # fmt: skip
    assert load_settings({}).openai_text_tools == "auto"
    env = load_settings({"LOOPGATE_OPENAI_TEXT_TOOLS": "on"}, model)
    provider = provider_from_settings(env)
    assert isinstance(provider, OpenAIProvider) and provider.text_tools == "on"
    args = build_parser().parse_args(["serve", "--openai-text-tools", "off"])
    flagged = load_settings({"LOOPGATE_OPENAI_TEXT_TOOLS": "on"}, {**model,
                            "openai_text_tools": args.openai_text_tools})  # fmt: skip
    assert flagged.openai_text_tools == "off"
    with pytest.raises(ValueError, match="openai_text_tools"):
        load_settings({"LOOPGATE_OPENAI_TEXT_TOOLS": "maybe"})
    with pytest.raises(ValueError, match="text_tools"):
        OpenAIProvider("http://127.0.0.1:9/v1", "m", text_tools="maybe")  # type: ignore[arg-type]


async def traced_run(base_url: str, mode: TextToolsMode) -> list[Any]:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(SimpleSpanProcessor(exporter))
    settings = Settings(
        provider="openai",
        openai_base_url=base_url,
        openai_model="transcript-qwen3-think-tool-call",
        openai_text_tools=mode,
        tools=["tests.reference.weather_tools"],
    )
    try:
        async with build_hub(settings, telemetry=telemetry) as hub:
            run = await hub.start(StartRun(input="What's the weather in Paris?"))
            with anyio.fail_after(20):
                await hub.run(run.id).ended.wait()
    finally:
        telemetry.shutdown()
    return list(exporter.get_finished_spans())


async def test_a_text_tool_call_is_a_tool_span_in_the_trace(base_url: str) -> None:
    spans = await traced_run(base_url, "auto")
    [tool] = [s for s in spans if s.name == "execute_tool get_weather"]
    assert tool.attributes is not None
    assert str(tool.attributes["gen_ai.tool.call.id"]).startswith("call_")
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    assert {s.context.trace_id for s in spans} == {tool.context.trace_id}
    # Off: the tags are text, no tool runs, no span.
    assert not [s for s in await traced_run(base_url, "off") if s.name.startswith("execute_tool")]
