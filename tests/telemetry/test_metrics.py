"""Metrics of the hub on the telemetry's own MeterProvider: active runs, runs started,
events (its rate is events/s) and subscribers by adapter; exported over OTLP/HTTP by
`loopgate serve` to a real receiver."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry
from loopgate.gateway.telemetry.config import build_telemetry, metrics_endpoint
from tests.fakes.otlp_receiver import OtlpReceiver
from tests.fakes.servers import serve_app
from tests.gateway.harness import gateway_process
from tests.gateway.sse_client import envelopes, read_stream


def collected(reader: InMemoryMetricReader) -> dict[str, Any]:
    """name → value, or name → {consumer: value} for the attributed one."""
    out: dict[str, Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource_metrics in data.resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points = list(metric.data.data_points)
                if metric.name == "loopgate.subscribers":
                    out[metric.name] = {
                        p.attributes["loopgate.delivery.consumer"]: p.value for p in points
                    }
                else:
                    (point,) = points
                    out[metric.name] = point.value
    return out


@pytest.mark.anyio
async def test_the_hub_is_measured_when_the_reader_collects() -> None:
    reader = InMemoryMetricReader()
    telemetry = Telemetry(SimpleSpanProcessor(InMemorySpanExporter()), metric_reader=reader)
    async with build_hub(Settings(scripted_delay_s=0.0), telemetry=telemetry) as hub:
        first = await hub.start(StartRun(source="ingest"))
        for text in ("a", "b", "c"):
            await hub.push(first.id, LoopEvent("content_delta", {"delta": text}))
        second = await hub.start(StartRun(source="ingest"))
        async with (
            hub.subscribe(first.id, consumer="sse"),
            hub.subscribe(first.id, consumer="sse"),
            hub.subscribe(second.id, consumer="agui"),
        ):
            during = collected(reader)
        await hub.push(first.id, LoopEvent("completion", {"status": "completed"}))
        after = collected(reader)
    telemetry.shutdown()
    assert during == {
        "loopgate.runs.active": 2,
        "loopgate.runs.started": 2,
        "loopgate.events": 3,
        "loopgate.subscribers": {"agui": 1, "sse": 2},
    }
    assert after["loopgate.runs.active"] == 1
    assert after["loopgate.events"] == 4
    assert after["loopgate.subscribers"] == {"agui": 0, "sse": 0}  # gone to zero, not gone


OTLP = {"OTEL_METRICS_EXPORTER": "otlp"}


@pytest.mark.parametrize(
    ("setting", "env", "expected"),
    [
        (None, OTLP, None),
        ("http://c:4318/", OTLP, "http://c:4318/v1/metrics"),
        ("http://c:4318/v1/traces", OTLP, "http://c:4318/v1/metrics"),
        (
            None,
            {**OTLP, "OTEL_EXPORTER_OTLP_ENDPOINT": "https://h/otel"},
            "https://h/otel/v1/metrics",
        ),
        (None, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m"}, "http://m"),
        # Opt-in: a traces endpoint alone (Jaeger, Phoenix, Langfuse take no metrics) sends none.
        ("http://c:4318", {}, None),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, None),
        (
            None,
            {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m", "OTEL_METRICS_EXPORTER": "none"},
            None,
        ),
    ],
)
def test_metrics_endpoint_resolution(
    setting: str | None, env: dict[str, str], expected: str | None
) -> None:
    assert metrics_endpoint(Settings(otel_endpoint=setting), env) == expected


def test_metrics_are_off_unless_asked_for() -> None:
    console = build_telemetry(Settings(trace_console=True), {})
    assert console is not None and console.metric_reader is None
    console.shutdown()
    collector = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    traces_only = build_telemetry(Settings(), collector)
    assert traces_only is not None and traces_only.metric_reader is None
    traces_only.shutdown()
    both = build_telemetry(Settings(), {**collector, **OTLP})
    assert both is not None and both.metric_reader is not None
    both.shutdown()


def test_loopgate_serve_exports_metrics_over_otlp_http() -> None:
    receiver = OtlpReceiver()
    with serve_app(receiver.app) as collector:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
            "OTEL_SERVICE_NAME": "loopgate-metrics",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_METRIC_EXPORT_INTERVAL": "200",  # every 0.2 s instead of 60 s
        }
        with gateway_process("--scripted-delay", "0", env=env) as (base, _):
            run = httpx.post(f"{base}/v1/runs", json={"input": "hello"}).json()
            events = envelopes(read_stream(base, run["id"]))
            receiver.wait_for(
                lambda r: any(p.value >= len(events) for p in r.points_of("loopgate.events"))
            )
            started = receiver.wait_for(lambda r: r.points_of("loopgate.runs.started"))
    assert started[-1].value == 1
    assert started[-1].resource["service.name"] == "loopgate-metrics"
    assert {p.name for p in receiver.points} >= {"loopgate.runs.active", "loopgate.events"}
