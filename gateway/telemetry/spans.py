"""Span records → spans of the SDK's own tracer, with the envelopes' times.

Spans are started and ended explicitly (``start_time``/``end_time`` from the records), never
made current here: a run's events are handled in whichever task published them, so nothing
may be left attached to it. Code that wants a span current while it works (a model request,
a tool call) asks :meth:`gateway.telemetry.Telemetry.scope`, in its own task.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ...contracts.ports import MAX_TRACESTATE_CHARS
from .records import RUN, Record, SpanEnd, SpanEvent, SpanStart

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_propagator = TraceContextTextMapPropagator()
# A root with no parent at all: whatever is current in the publishing task is not the run's.
NO_PARENT = Context()


def parse_traceparent(traceparent: Any, tracestate: Any = None) -> SpanContext | None:
    """The remote parent a W3C ``traceparent`` (and ``tracestate``) names; None if missing or
    malformed. A malformed ``tracestate`` is dropped, as the W3C spec says, not the parent."""
    if not isinstance(traceparent, str) or not traceparent or len(traceparent) > 256:
        return None
    carrier = {"traceparent": traceparent}
    if isinstance(tracestate, str) and tracestate and len(tracestate) <= MAX_TRACESTATE_CHARS:
        carrier["tracestate"] = tracestate
    context = _propagator.extract(carrier, context=Context())
    span_context = get_current_span(context).get_span_context()
    return span_context if span_context.is_valid else None


def parent_context(parent: SpanContext | None) -> Context:
    """A context whose only span is ``parent`` (a caller's, or a stored run span's)."""
    if parent is None:
        return NO_PARENT
    return set_span_in_context(NonRecordingSpan(parent), Context())


def traceparent_of(span: Span) -> str:
    """The span's W3C ``traceparent``, as the SDK's propagator writes it."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=set_span_in_context(span, Context()))
    return carrier["traceparent"]


class RunSpans:
    """The open spans of one run, by the projector's keys. The run span (key ``run``) is the
    parent of anything whose parent is unknown; ``parent`` is the run span's own parent."""

    __slots__ = ("chat", "open", "parent", "run", "run_context", "tracer")

    def __init__(self, tracer: Tracer, parent: Context) -> None:
        self.tracer = tracer
        self.parent = parent
        self.run: Span | None = None
        # The parent of the run's spans but the run span itself (most of them): made once.
        self.run_context = parent
        # key → (span, its start in ns: an end before it is clamped to it)
        self.open: dict[str, tuple[Span, int]] = {}
        # The newest open model request's key, for scope(run_id, "chat").
        self.chat: str | None = None

    def apply(self, records: Iterable[Record]) -> None:
        for record in records:
            if type(record) is SpanStart:
                self._start(record)
            elif type(record) is SpanEnd:
                self._end(record)
            elif type(record) is SpanEvent:
                self._event(record)

    def span(self, key: str) -> Span | None:
        if key == "chat":
            key = self.chat or ""
        found = self.open.get(key)
        return found[0] if found is not None else None

    def _start(self, record: SpanStart) -> None:
        if record.parent is None:
            context = self.parent
        elif record.parent == RUN or record.parent not in self.open:
            context = self.run_context
        else:
            context = set_span_in_context(self.open[record.parent][0], Context())
        span = self.tracer.start_span(
            record.name,
            context=context,
            kind=_KINDS[record.kind],
            attributes=record.attributes,
            start_time=record.start_ns,
        )
        self.open[record.key] = (span, record.start_ns)
        if record.key == RUN:
            self.run = span
            self.run_context = set_span_in_context(span, Context())
        elif record.kind == "client":
            self.chat = record.key

    def _end(self, record: SpanEnd) -> None:
        found = self.open.pop(record.key, None)
        if found is None:
            return
        span, start = found
        if record.key == self.chat:
            self.chat = None
        if record.attributes:
            span.set_attributes(record.attributes)
        if record.error is not None:
            span.set_status(Status(StatusCode.ERROR, record.error))
        span.end(end_time=max(record.end_ns, start))

    def _event(self, record: SpanEvent) -> None:
        found = self.open.get(record.key) or self.open.get(RUN)
        if found is not None:
            found[0].add_event(record.name, record.attributes, timestamp=record.ts)
