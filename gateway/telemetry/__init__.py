"""OpenTelemetry traces of every run, whatever its source (docs/telemetry.md)."""

from loopgate.gateway.telemetry.config import build_telemetry
from loopgate.gateway.telemetry.projector import TraceProjector
from loopgate.gateway.telemetry.records import SpanEnd, SpanEvent, SpanStart, TraceContext
from loopgate.gateway.telemetry.telemetry import (
    TRACE_ID_KEY,
    TRACEPARENT_KEY,
    Telemetry,
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
