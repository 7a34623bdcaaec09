"""Sampling: the standard OTEL_TRACES_SAMPLER variables, and no work for unsampled runs."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry
from loopgate.gateway.telemetry.config import build_telemetry

pytestmark = pytest.mark.anyio

SAMPLED_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
UNSAMPLED_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


@pytest.mark.parametrize(
    ("name", "arg", "description"),
    [
        ("always_on", "", "AlwaysOnSampler"),
        ("always_off", "", "AlwaysOffSampler"),
        ("traceidratio", "0.25", "TraceIdRatioBased{0.25}"),
        ("parentbased_always_on", "", "ParentBased{root:AlwaysOnSampler,"),
        ("parentbased_traceidratio", "0.5", "ParentBased{root:TraceIdRatioBased{0.5},"),
        (None, None, "ParentBased{root:AlwaysOnSampler,"),
    ],
)
def test_the_sdk_reads_the_standard_sampler_variables(
    monkeypatch: pytest.MonkeyPatch, name: str | None, arg: str | None, description: str
) -> None:
    """Nothing of ours reads OTEL_TRACES_SAMPLER: the SDK's TracerProvider does."""
    for key, value in (("OTEL_TRACES_SAMPLER", name), ("OTEL_TRACES_SAMPLER_ARG", arg)):
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    telemetry = build_telemetry(Settings(trace_console=True), {})
    assert telemetry is not None
    try:
        assert telemetry.provider.sampler.get_description().startswith(description)
    finally:
        telemetry.shutdown()


async def run_traced(sampler: Sampler, traceparent: str | None = None) -> tuple[Any, list[Any]]:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(SimpleSpanProcessor(exporter), sampler=sampler)
    async with build_hub(Settings(scripted_delay_s=0.0), telemetry=telemetry) as hub:
        info = await hub.start(StartRun(source="ingest", traceparent=traceparent))
        run = hub.run(info.id)
        await hub.push(info.id, LoopEvent("content_delta", {"delta": "hi"}))
        observing = (list(run.observers), run.observed)
        await hub.push(info.id, LoopEvent("completion", {"status": "completed"}))
        info = await hub.get(info.id)
    return (info, observing), list(exporter.get_finished_spans())


async def test_an_unsampled_run_is_not_recorded_but_keeps_its_ids() -> None:
    (info, observing), spans = await run_traced(ALWAYS_OFF)
    assert spans == []
    assert observing == ([], frozenset())  # the hub calls telemetry for none of its events
    assert len(info.metadata["trace_id"]) == 32
    assert not sampled(info.metadata["traceparent"])
    (info, _), spans = await run_traced(ALWAYS_ON)
    assert [s.name for s in spans] == ["invoke_agent loopgate"]
    assert sampled(info.metadata["traceparent"])


def sampled(traceparent: str) -> bool:
    return bool(int(traceparent.rsplit("-", 1)[1], 16) & 1)


async def test_parent_based_follows_the_caller() -> None:
    _, spans = await run_traced(ParentBased(ALWAYS_OFF), SAMPLED_PARENT)
    assert [s.context.trace_id for s in spans] == [0x4BF92F3577B34DA6A3CE929D0E0E4736]
    _, spans = await run_traced(ParentBased(ALWAYS_ON), UNSAMPLED_PARENT)
    assert spans == []


async def test_a_ratio_samples_about_that_share_of_runs() -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(SimpleSpanProcessor(exporter), sampler=TraceIdRatioBased(0.5))
    async with build_hub(Settings(max_active_runs=300), telemetry=telemetry) as hub:
        for _ in range(200):
            info = await hub.start(StartRun(source="ingest"))
            await hub.push(info.id, LoopEvent("completion", {"status": "completed"}))
    recorded = len(exporter.get_finished_spans())
    assert 60 < recorded < 140, recorded  # binomial(200, 0.5): outside this is < 1e-8
