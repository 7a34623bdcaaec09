"""Telemetry in the gateway's process, as `build_telemetry` makes it from settings: console
export, content capture (clipped), the events a traced run hands over, a bounded shutdown."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry, TraceProjector
from loopgate.gateway.telemetry.config import build_telemetry

pytestmark = pytest.mark.anyio


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the SDK's console exporter printed, one after another."""
    decoder = json.JSONDecoder()
    spans: list[dict[str, Any]] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return spans
        span, i = decoder.raw_decode(text, i)
        spans.append(span)


async def one_loop_run(
    telemetry: Telemetry, prompt: str = "What time is it, and what is 6 * 7?"
) -> None:
    async with build_hub(Settings(scripted_delay_s=0.0), telemetry=telemetry) as hub:
        info = await hub.start(StartRun(input=prompt))
        with anyio.fail_after(10):
            await hub.run(info.id).ended.wait()


async def test_trace_console_prints_every_span_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    telemetry = build_telemetry(Settings(trace_console=True), {})
    assert telemetry is not None
    await one_loop_run(telemetry)
    telemetry.shutdown()  # flushes the batch processor
    spans = console_spans(capfd.readouterr().err)
    names = {s["name"] for s in spans}
    assert {"invoke_agent loopgate", "chat loopgate-scripted", "execute_tool clock"} <= names
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"loopgate"}
    assert {s["context"]["trace_id"] for s in spans} == {spans[0]["context"]["trace_id"]}
    for span in spans:
        assert not any(k.startswith("gen_ai.input") for k in span["attributes"]), span["name"]


async def test_trace_content_is_captured_and_clipped(capfd: pytest.CaptureFixture[str]) -> None:
    settings = Settings(trace_console=True, trace_content=True, trace_content_max_chars=8)
    telemetry = build_telemetry(settings, {})
    assert telemetry is not None
    await one_loop_run(telemetry, "what is the time now?")
    telemetry.shutdown()
    spans = {s["name"]: s for s in console_spans(capfd.readouterr().err)}
    run = spans["invoke_agent loopgate"]["attributes"]
    (message,) = json.loads(run["gen_ai.input.messages"])
    assert message["parts"][0]["content"] == "what is …"
    tool = spans["execute_tool clock"]["attributes"]
    assert len(tool["gen_ai.tool.call.result"]) <= 9


async def test_a_traced_run_hands_over_only_what_changes_a_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model call's deltas after its first change no span: the hub does not call
    telemetry for them (the run's observed kinds narrow), nor for unsampled runs at all."""
    fed: list[str] = []
    feed = TraceProjector.feed

    def counting(self: TraceProjector, env: Any) -> Sequence[Any]:
        fed.append(env.kind)
        return feed(self, env)

    monkeypatch.setattr(TraceProjector, "feed", counting)
    exporter = InMemorySpanExporter()
    async with build_hub(Settings(), telemetry=Telemetry(SimpleSpanProcessor(exporter))) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        events = [LoopEvent("llm_request", {"model": "m"})]
        events += [LoopEvent("content_delta", {"delta": "x"})] * 100
        events += [LoopEvent("llm_response", {}), LoopEvent("content_delta", {"delta": "y"})]
        events += [LoopEvent("completion", {"status": "completed"})]
        for event in events:
            await hub.push(run_id, event)
    assert fed == ["llm_request", "content_delta", "llm_response", "completion"]
    (chat,) = [s for s in exporter.get_finished_spans() if s.name == "chat m"]
    assert chat.attributes is not None
    first_chunk = chat.attributes["gen_ai.response.time_to_first_chunk"]
    assert isinstance(first_chunk, float) and first_chunk >= 0


class BlockingExporter(SpanExporter):
    """A collector that never answers (until the test lets it go)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.called = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.called.set()
        self.release.wait()
        return SpanExportResult.FAILURE


async def test_shutdown_gives_up_on_a_collector_that_never_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = BlockingExporter()
    telemetry = Telemetry(BatchSpanProcessor(exporter), shutdown_timeout_s=0.3)
    try:
        await one_loop_run(telemetry)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="loopgate.telemetry"):
            telemetry.shutdown()
        assert time.monotonic() - started < 5
        assert exporter.called.is_set()
        assert "could not export its last spans in 0.3 s" in caplog.text
    finally:
        exporter.release.set()


@pytest.mark.parametrize(
    "broken",
    [
        "loopgate.gateway.telemetry.projector.TraceProjector.start",
        "loopgate.gateway.telemetry.delivery.Deliveries.opened",
        "loopgate.gateway.telemetry.delivery.Deliveries.closed",
        "loopgate.gateway.telemetry.telemetry.delivery_summary",
    ],
)
async def test_every_hook_swallows_its_own_failure(
    broken: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug in telemetry")

    monkeypatch.setattr(broken, fail)
    telemetry = Telemetry(SimpleSpanProcessor(InMemorySpanExporter()))
    with caplog.at_level(logging.ERROR, logger="loopgate.telemetry"):
        async with build_hub(Settings(scripted_delay_s=0.0), telemetry=telemetry) as hub:
            info = await hub.start(StartRun(input="What time is it, and what is 6 * 7?"))
            async with hub.subscribe(info.id, consumer="sse") as sub:
                while not sub.done:
                    await sub.next_batch()
            run = hub.run(info.id)
    assert run.record.status == "completed"
    assert "bug in telemetry" in caplog.text
