"""OpenTelemetry traces of every run, whatever its source (docs/telemetry.md)."""

from .config import build_telemetry
from .projector import TraceProjector
from .records import SpanEnd, SpanEvent, SpanStart, TraceContext
from .telemetry import (
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
