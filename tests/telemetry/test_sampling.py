"""Sampling: the standard OTEL_TRACES_SAMPLER variables, and no work for unsampled runs."""

from __future__ import annotations

import logging
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

from contracts.envelope import LoopEvent
from contracts.ports import StartRun
from gateway.app import build_hub
from gateway.settings import Settings
from gateway.telemetry import Telemetry
from gateway.telemetry.telemetry import sampler_from_env

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
        ("", "", "ParentBased{root:AlwaysOnSampler,"),
    ],
)
def test_sampler_from_the_standard_variables(name: str, arg: str, description: str) -> None:
    env = {"OTEL_TRACES_SAMPLER": name, "OTEL_TRACES_SAMPLER_ARG": arg}
    assert sampler_from_env(env).get_description().startswith(description)


def test_bad_sampler_settings_fall_back_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="loopgate.telemetry"):
        unknown = sampler_from_env({"OTEL_TRACES_SAMPLER": "jaeger_remote"})
        bad_ratio = sampler_from_env(
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}
        )
    assert unknown.get_description().startswith("ParentBased{root:AlwaysOnSampler,")
    assert bad_ratio.get_description() == "TraceIdRatioBased{1.0}"
    assert "jaeger_remote" in caplog.text and "'2'" in caplog.text


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
    assert info.metadata["traceparent"].endswith("-00")
    (info, _), spans = await run_traced(ALWAYS_ON)
    assert [s.name for s in spans] == ["invoke_agent loopgate"]
    assert info.metadata["traceparent"].endswith("-01")


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
