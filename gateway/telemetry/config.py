"""Telemetry from settings and ``OTEL_*`` variables: what to export, and to where.

Everything else the SDK reads itself: the sampler (``OTEL_TRACES_SAMPLER``), the batch
processor (``OTEL_BSP_*``), span limits (``OTEL_SPAN_*``), resource attributes and the OTLP
exporter's headers, compression and certificates (``OTEL_EXPORTER_OTLP_*``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from ..settings import Settings
from .telemetry import DEFAULT_SERVICE_NAME, Telemetry

# What shutting down may take beyond one export's timeout before the last spans are given up.
SHUTDOWN_MARGIN_S = 1.0


def build_telemetry(settings: Settings, env: Mapping[str, str]) -> Telemetry | None:
    """Telemetry as configured, or None when nothing would be exported (the default)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = span_exporters(settings, env)
    if not exporters:
        return None
    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name(settings, env)}),
        shutdown_on_exit=False,
    )
    timeout_ms = settings.otel_export_timeout_s * 1000
    for exporter in exporters:
        # Batched, in the SDK's own thread: exporters block on I/O. When the collector is
        # down, each export gives up after the timeout and the bounded queue drops spans.
        provider.add_span_processor(BatchSpanProcessor(exporter, export_timeout_millis=timeout_ms))
    return Telemetry(
        provider=provider,
        content=settings.trace_content,
        max_content_chars=settings.trace_content_max_chars,
        max_open_spans=settings.trace_max_open_spans,
        metric_reader=metric_reader(settings, env),
        shutdown_timeout_s=settings.otel_export_timeout_s + SHUTDOWN_MARGIN_S,
    )


def span_exporters(settings: Settings, env: Mapping[str, str]) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    endpoint = traces_endpoint(settings, env)
    if endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporters.append(
            OTLPSpanExporter(endpoint=endpoint, timeout=settings.otel_export_timeout_s)
        )
    if settings.trace_console:
        exporters.append(ConsoleSpanExporter(out=sys.stderr))
    return exporters


def traces_endpoint(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL: the setting or OTEL_EXPORTER_OTLP_ENDPOINT are base URLs
    (``/v1/traces`` is appended), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given."""
    return _endpoint(settings, env, "traces")


def metrics_endpoint(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP metrics URL, found as :func:`traces_endpoint` is (``/v1/metrics``,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) — only when asked for, by that variable or
    OTEL_METRICS_EXPORTER=otlp: the usual trace backends (Jaeger, Phoenix, Langfuse) take
    no metrics, and every export would fail."""
    exporter = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    own = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
    if exporter == "none" or not (own or exporter == "otlp"):
        return None
    return _endpoint(settings, env, "metrics")


def _endpoint(settings: Settings, env: Mapping[str, str], signal: str) -> str | None:
    if settings.otel_endpoint:
        return _signal_url(settings.otel_endpoint, signal)
    own = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    if own:
        return own
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return _signal_url(env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip(), signal)
    return None


def _signal_url(base: str, signal: str) -> str:
    base = base.rstrip("/")
    for known in ("/v1/traces", "/v1/metrics"):
        base = base.removesuffix(known)
    return f"{base}/v1/{signal}"


def service_name(settings: Settings, env: Mapping[str, str]) -> str:
    return (
        settings.otel_service_name
        or env.get("OTEL_SERVICE_NAME", "").strip()
        or DEFAULT_SERVICE_NAME
    )


def metric_reader(settings: Settings, env: Mapping[str, str]) -> MetricReader | None:
    """OTLP/HTTP metrics next to the traces, every OTEL_METRIC_EXPORT_INTERVAL ms (60 s)."""
    endpoint = metrics_endpoint(settings, env)
    if endpoint is None:
        return None
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    exporter = OTLPMetricExporter(endpoint=endpoint, timeout=settings.otel_export_timeout_s)
    return PeriodicExportingMetricReader(
        exporter, export_timeout_millis=settings.otel_export_timeout_s * 1000
    )
