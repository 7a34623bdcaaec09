"""Real OpenTelemetry spans (SDK + InMemorySpanExporter): goldens, the hub, trace context."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conformance.otel import STREAMS, encode_tree, golden_path, load_stream, tree_from_spans
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.ports import CutOff, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub, Run
from loopgate.gateway.hub.run import new_record
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry, TraceProjector

pytestmark = pytest.mark.anyio

STREAM_PATHS = sorted(STREAMS.glob("*.jsonl"))
PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def telemetry_for(exporter: SpanExporter, **kw: Any) -> Telemetry:
    return Telemetry(SimpleSpanProcessor(exporter), **kw)


def hub_with(telemetry: Telemetry, **overrides: Any) -> Hub:
    return build_hub(Settings(scripted_delay_s=0.0, **overrides), telemetry=telemetry)


async def finish(hub: Hub, run_id: str) -> Run:
    run = hub.run(run_id)
    with anyio.fail_after(10):
        await run.ended.wait()
    return run


def strip_times(node: dict[str, Any]) -> dict[str, Any]:
    """A tree without what differs between a recording and its live replay."""
    attrs = {
        k: v
        for k, v in node["attributes"].items()
        if k != "gen_ai.response.time_to_first_chunk" and not k.startswith("loopgate.delivery")
    }
    return {
        "name": node["name"],
        "kind": node["kind"],
        "status": node["status"],
        "attributes": attrs,
        "events": [{"name": e["name"], "attributes": e["attributes"]} for e in node["events"]],
        "children": [strip_times(c) for c in node["children"]],
    }


@pytest.mark.parametrize("stream", STREAM_PATHS, ids=lambda p: p.stem)
def test_exported_spans_match_the_golden(stream: Path, exporter: InMemorySpanExporter) -> None:
    """The recorded envelopes (their own ts) through the real SDK give the golden tree, byte
    for byte: names, kinds, parents, times, attributes, statuses, events."""
    envelopes = load_stream(stream)
    telemetry = telemetry_for(exporter)
    record = new_record(envelopes[0].run_id, envelopes[0].run_id, "replay", envelopes[0].ts, {})
    run = Run(record)
    telemetry.run_started(run)
    for env in envelopes:
        telemetry.event(run, env)
    if envelopes[-1].kind != "completion":
        last = envelopes[-1]
        end = {"status": "failed", "reason": "truncated"}
        telemetry.event(run, Envelope(last.run_id, last.seq + 1, last.ts, "completion", end))
    spans = exporter.get_finished_spans()
    assert spans, "no span was exported"
    root = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert root.parent is None
    assert len({s.context.trace_id for s in spans}) == 1
    delivery = {k for k in (root.attributes or {}) if k.startswith("loopgate.delivery")}
    assert delivery == {"loopgate.delivery.consumers"}  # nobody subscribed
    tree = tree_from_spans(spans)
    tree["attributes"].pop("loopgate.delivery.consumers")
    assert encode_tree(tree) == golden_path(stream).read_bytes()
    assert record.metadata["trace_id"] == f"{root.context.trace_id:032x}"


@pytest.mark.parametrize(
    "stream", [p for p in STREAM_PATHS if p.stem != "unknown-kinds-fields"], ids=lambda p: p.stem
)
async def test_replays_through_the_hub_give_the_same_tree(
    stream: Path, exporter: InMemorySpanExporter
) -> None:
    """A replayed run is traced like the live one was: same spans, re-timed by the hub."""
    async with hub_with(telemetry_for(exporter)) as hub:
        info = await hub.start(StartRun(source="replay", replay=stream.stem))
        await finish(hub, info.id)
    tree = tree_from_spans(exporter.get_finished_spans())
    expected = json.loads(golden_path(stream).read_bytes())
    # The hub names the run; the recording named it after its file.
    for key in ("gen_ai.conversation.id", "loopgate.run.id"):
        assert tree["attributes"].pop(key) == info.id
        expected["attributes"].pop(key)
    assert strip_times(tree) == strip_times(expected)
    assert [c["start"] for c in tree["children"]] == sorted(c["start"] for c in tree["children"])


async def test_a_loop_run_has_model_and_tool_spans_and_the_trace_id_in_its_json(
    exporter: InMemorySpanExporter,
) -> None:
    async with hub_with(telemetry_for(exporter, loop_provider_name="loopgate.scripted")) as hub:
        info = await hub.start(
            StartRun(input="What time is it, and what is 6 * 7?", thread_id="thread-7")
        )
        await finish(hub, info.id)
        shown = await hub.get(info.id)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    run_span = spans["invoke_agent loopgate"]
    assert run_span.attributes["gen_ai.conversation.id"] == "thread-7"
    assert run_span.attributes["loopgate.run.status"] == "completed"
    assert run_span.attributes["gen_ai.provider.name"] == "loopgate.scripted"
    chat = spans["chat loopgate-scripted"]
    assert chat.kind is SpanKind.CLIENT
    assert chat.parent.span_id == run_span.context.span_id
    assert chat.attributes["gen_ai.provider.name"] == "loopgate.scripted"
    assert chat.attributes["gen_ai.response.time_to_first_chunk"] > 0
    assert {"execute_tool clock", "execute_tool calculate"} <= set(spans)
    trace_id = f"{run_span.context.trace_id:032x}"
    assert shown.metadata["trace_id"] == trace_id
    # Sampled (01), its trace id drawn at random (02: W3C Trace Context level 2).
    assert shown.metadata["traceparent"] == f"00-{trace_id}-{run_span.context.span_id:016x}-03"
    for span in spans.values():
        assert not CONTENT_KEYS & set(span.attributes or {}), f"{span.name} carries content"


async def test_content_is_captured_only_when_switched_on(exporter: InMemorySpanExporter) -> None:
    async with hub_with(telemetry_for(exporter, content=True)) as hub:
        info = await hub.start(StartRun(input="what is 2+2?"))
        await finish(hub, info.id)
    attrs: dict[str, Any] = {}
    for span in exporter.get_finished_spans():
        attrs.update(span.attributes or {})
    assert json.loads(attrs["gen_ai.input.messages"])[0]["parts"][0]["content"] == "what is 2+2?"
    assert json.loads(attrs["gen_ai.output.messages"])[0]["role"] == "assistant"
    assert "gen_ai.tool.call.arguments" in attrs and "gen_ai.tool.call.result" in attrs


@pytest.mark.parametrize("source", ["loop", "ingest", "replay"])
async def test_traceparent_in_start_run_parents_the_run_span(
    exporter: InMemorySpanExporter, source: str
) -> None:
    """The path every adapter takes: a header or ``params._meta.traceparent`` becomes
    ``StartRun.traceparent``."""
    async with hub_with(telemetry_for(exporter)) as hub:
        request = StartRun(
            input="hi" if source == "loop" else None,
            source=source,  # type: ignore[arg-type]
            replay="plain-answer" if source == "replay" else None,
            traceparent=TRACEPARENT,
        )
        info = await hub.start(request)
        if source == "ingest":
            await hub.push(info.id, _event("completion", {"status": "completed"}))
        await finish(hub, info.id)
    spans = exporter.get_finished_spans()
    assert {f"{s.context.trace_id:032x}" for s in spans} == {PARENT_TRACE}
    root = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert root.parent is not None and root.parent.is_remote
    assert f"{root.parent.span_id:016x}" == PARENT_SPAN
    assert info.metadata["trace_id"] == PARENT_TRACE
    assert info.metadata["traceparent"].startswith(
        f"00-{PARENT_TRACE}-{root.context.span_id:016x}-"
    )


@pytest.mark.parametrize("bad", ["garbage", "00-" + "0" * 32 + "-" + "0" * 16 + "-01", "x" * 300])
async def test_a_malformed_traceparent_starts_a_new_trace(
    exporter: InMemorySpanExporter, bad: str
) -> None:
    async with hub_with(telemetry_for(exporter)) as hub:
        info = await hub.start(StartRun(input="hi", traceparent=bad))
        await finish(hub, info.id)
    root = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert root.parent is None
    assert info.metadata["trace_id"] == f"{root.context.trace_id:032x}" != "0" * 32


async def test_an_unsampled_parent_exports_nothing_but_still_shows_the_trace_id(
    exporter: InMemorySpanExporter,
) -> None:
    async with hub_with(telemetry_for(exporter)) as hub:
        info = await hub.start(StartRun(input="hi", traceparent=TRACEPARENT[:-2] + "00"))
        await finish(hub, info.id)
    assert exporter.get_finished_spans() == ()
    assert info.metadata["trace_id"] == PARENT_TRACE
    assert info.metadata["traceparent"].endswith("-00")


async def test_delivery_spans_per_subscriber_and_a_summary_per_adapter(
    exporter: InMemorySpanExporter,
) -> None:
    async with hub_with(telemetry_for(exporter), subscriber_max_lag=5) as hub:
        info = await hub.start(StartRun(source="ingest"))
        run = hub.run(info.id)
        cut_off: list[bool] = []

        async def reader(consumer: str) -> None:
            async with hub.subscribe(info.id, consumer=consumer) as sub:
                while not sub.done:
                    await sub.next_batch()

        async def stuck() -> None:
            try:
                async with hub.subscribe(info.id, consumer="acp"):
                    await anyio.sleep(10)  # never reads: cut off at the next lag check
            except CutOff:
                cut_off.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader, "sse")
            tg.start_soon(reader, "agui")
            tg.start_soon(stuck)
            while len(run.subscribers) < 3:
                await anyio.lowlevel.checkpoint()
            for i in range(70):
                hub.publish(run, "content_delta", {"delta": str(i)})
                if i % 3 == 0:
                    await anyio.lowlevel.checkpoint()
            hub.publish(run, "completion", {"status": "completed"})
        assert cut_off == [True]
        # A late subscriber to the finished run still joins its trace.
        async with hub.subscribe(info.id, consumer="sse") as late:
            while not late.done:
                await late.next_batch()
    spans = exporter.get_finished_spans()
    root = next(s for s in spans if s.name.startswith("invoke_agent"))
    deliveries = [s for s in spans if s.name.startswith("deliver ")]
    assert sorted(s.name for s in deliveries) == [
        "deliver acp",
        "deliver agui",
        "deliver sse",
        "deliver sse",
    ]
    for span in deliveries:
        assert span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
    by_name = {s.name: s for s in deliveries if s.name != "deliver sse"}
    cut = by_name["deliver acp"]
    assert cut.status.status_code is StatusCode.ERROR
    assert cut.attributes["error.type"] == "cut_off"
    agui = by_name["deliver agui"]
    assert agui.status.status_code is StatusCode.UNSET
    assert agui.attributes["loopgate.delivery.events"] == 71
    assert agui.attributes["loopgate.delivery.complete"] is True
    late_span = max((s for s in deliveries if s.name == "deliver sse"), key=lambda s: s.start_time)
    assert late_span.start_time > root.end_time
    assert late_span.attributes["loopgate.delivery.events"] == 71
    attrs = root.attributes
    assert list(attrs["loopgate.delivery.consumers"]) == ["acp", "agui", "sse"]
    assert attrs["loopgate.delivery.acp.cut_offs"] == 1
    assert attrs["loopgate.delivery.agui.subscribers"] == 1
    assert attrs["loopgate.delivery.agui.cut_offs"] == 0


class FailingExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        raise ConnectionError("collector down")


async def test_telemetry_failures_never_affect_a_run(
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with hub_with(telemetry_for(FailingExporter())) as hub:
        info = await hub.start(StartRun(input="hi"))
        run = await finish(hub, info.id)
        assert run.record.status == "completed"

    def broken(self: TraceProjector, env: Envelope) -> Any:
        raise RuntimeError("bug in telemetry")

    monkeypatch.setattr(TraceProjector, "feed", broken)
    caplog.set_level(logging.ERROR, "loopgate.telemetry")
    async with hub_with(telemetry_for(exporter)) as hub:
        info = await hub.start(StartRun(input="hi"))
        run = await finish(hub, info.id)
        assert run.record.status == "completed"
        assert run.events[-1].data["status"] == "completed"
    assert "its trace is dropped" in caplog.text


def _event(kind: str, data: dict[str, Any]) -> Any:
    from loopgate.contracts.envelope import LoopEvent

    return LoopEvent(kind, data)


def test_tree_from_spans_rejects_two_roots() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for name in ("a", "b"):
        tracer.start_span(name).end()
    spans: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
    with pytest.raises(ValueError, match="one root"):
        tree_from_spans(spans)
