"""OpenTelemetry traces of every run, whatever its source (docs/telemetry.md)."""

from gateway.telemetry.projector import (
    SpanEnd,
    SpanEvent,
    SpanStart,
    TraceContext,
    TraceProjector,
)
from gateway.telemetry.telemetry import (
    TRACE_ID_KEY,
    TRACEPARENT_KEY,
    Telemetry,
    build_telemetry,
)

__all__ = [
    "TRACEPARENT_KEY",
    "TRACE_ID_KEY",
    "SpanEnd",
    "SpanEvent",
    "SpanStart",
    "Telemetry",
    "TraceContext",
    "TraceProjector",
    "build_telemetry",
]
