"""Span records → finished OpenTelemetry spans, handed to the SDK's span processors.

The projector already knows each span's start and end (the envelopes' ``ts``), so a span is
written once, when it closes, as the SDK's own finished-span type (:class:`ReadableSpan`) —
what every processor and exporter (batch, OTLP, console, in-memory) consumes. The SDK's live
``Span`` machinery (a lock, attribute re-validation, context objects: ~45 µs per span on the
reference machine against ~7 µs here) is built for code that does not know its end yet; it
would be most of telemetry's cost. Nothing is ever made "current", so the "Failed to detach
context" trap cannot happen.
"""

from __future__ import annotations

from collections.abc import Iterable
from random import randbytes
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from contracts.ports import MAX_TRACESTATE_CHARS
from gateway.telemetry.projector import RUN, Attributes, Record, SpanEnd, SpanEvent, SpanStart
from gateway.telemetry.wire import SpanRef

SCOPE = InstrumentationScope("loopgate")
# Per span, like the SDK's default SpanLimits: a run that steers or retries a thousand times
# keeps its first annotations and counts the rest.
MAX_EVENTS = 128
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_UNSET = Status(StatusCode.UNSET)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
# What the SDK's TracerProvider does without OTEL_TRACES_SAMPLER: follow the caller's decision.
DEFAULT_SAMPLER: Sampler = ParentBased(ALWAYS_ON)
_propagator = TraceContextTextMapPropagator()
# All-zero ids are invalid (W3C trace-context).
_ZERO_TRACE_ID = "0" * 32
_ZERO_SPAN_ID = "0" * 16
# An explicit (immutable) empty parent: whatever is "current" in the caller's task is not ours.
_NO_PARENT = set_span_in_context(NonRecordingSpan(INVALID_SPAN_CONTEXT))


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


def format_traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def span_ref(context: SpanContext) -> SpanRef:
    state = context.trace_state
    return SpanRef(
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
        context.trace_flags.sampled,
        state.to_header() if state else "",
        context.is_remote,
    )


def from_span_ref(ref: SpanRef) -> SpanContext:
    """The context a :func:`span_ref` describes (our own encoding: no W3C parsing needed)."""
    return SpanContext(
        int(ref.trace_id, 16),
        int(ref.span_id, 16),
        is_remote=ref.remote,
        trace_flags=_SAMPLED if ref.sampled else _NOT_SAMPLED,
        trace_state=TraceState.from_header([ref.tracestate]) if ref.tracestate else None,
    )


class TraceIds:
    """New trace and span ids, and the sampling decision for new traces."""

    def __init__(
        self, id_generator: IdGenerator | None = None, sampler: Sampler = DEFAULT_SAMPLER
    ) -> None:
        self.ids = id_generator or RandomIdGenerator()
        self.sampler = sampler
        # The SDK's RandomIdGenerator draws from the `random` module; so does root_ref.
        self._random = type(self.ids) is RandomIdGenerator

    def root(self, parent: SpanContext | None) -> SpanContext:
        """The run span's context: in the parent's trace, else a new one; sampled as the
        sampler decides (by default: as the parent is, and always without one)."""
        trace_id = parent.trace_id if parent is not None else self.ids.generate_trace_id()
        if self.sampler is DEFAULT_SAMPLER:
            # ParentBased(ALWAYS_ON), decided without the SDK's context plumbing (a third of
            # what starting a run's trace costs): as the parent says, else sampled.
            sampled = parent.trace_flags.sampled if parent is not None else True
        else:
            parent_context = (
                set_span_in_context(NonRecordingSpan(parent)) if parent is not None else _NO_PARENT
            )
            decision = self.sampler.should_sample(parent_context, trace_id, "invoke_agent")
            sampled = decision.decision.is_sampled()
        return SpanContext(
            trace_id,
            self.ids.generate_span_id(),
            is_remote=False,
            trace_flags=_SAMPLED if sampled else _NOT_SAMPLED,
            trace_state=parent.trace_state if parent is not None else None,
        )

    def root_ref(self, parent: SpanContext | None) -> SpanRef:
        """:meth:`root` as it travels. A run without a caller's context under the default
        sampler and id generator (most runs) is decided without building a SpanContext."""
        if parent is None and self.sampler is DEFAULT_SAMPLER and self._random:
            ids = randbytes(24).hex()  # one draw for both ids
            if ids[:32] != _ZERO_TRACE_ID and ids[32:] != _ZERO_SPAN_ID:
                return SpanRef(ids[:32], ids[32:], True)
        return span_ref(self.root(parent))

    def child(self, parent: SpanContext) -> SpanContext:
        return SpanContext(
            parent.trace_id,
            self.ids.generate_span_id(),
            is_remote=False,
            trace_flags=parent.trace_flags,
            trace_state=parent.trace_state,
        )


class SpanWriter:
    """Finished spans out to a span processor."""

    def __init__(
        self, processor: SpanProcessor, resource: Resource, ids: TraceIds | None = None
    ) -> None:
        self.processor = processor
        self.resource = resource
        self.ids = ids or TraceIds()

    def write(
        self,
        *,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        start_ns: int,
        end_ns: int,
        attributes: Attributes,
        events: Iterable[Event] = (),
        error: str | None = None,
    ) -> None:
        if not context.trace_flags.sampled:
            return
        self.processor.on_end(
            ReadableSpan(
                name=name,
                context=context,
                parent=parent,
                resource=self.resource,
                attributes=attributes,
                events=tuple(events),
                kind=kind,
                status=_UNSET if error is None else Status(StatusCode.ERROR, error),
                start_time=start_ns,
                end_time=max(end_ns, start_ns),
                instrumentation_scope=SCOPE,
            )
        )


class _Open:
    __slots__ = ("attributes", "context", "dropped", "events", "kind", "name", "parent", "start")

    def __init__(
        self,
        name: str,
        kind: SpanKind,
        context: SpanContext,
        parent: SpanContext | None,
        start: int,
        attributes: Attributes,
    ) -> None:
        self.name = name
        self.kind = kind
        self.context = context
        self.parent = parent
        self.start = start
        # The projector hands each record's dict over (never reused), so no copy.
        self.attributes = attributes
        self.events: list[Event] = []
        self.dropped = 0


class RunSpans:
    """The open spans of one run, by the projector's keys. ``root`` is the run span's own
    context (decided where the run started), ``parent`` the caller's, if any."""

    __slots__ = ("open", "parent", "run_context", "writer")

    def __init__(self, writer: SpanWriter, parent: SpanContext | None, root: SpanContext) -> None:
        self.writer = writer
        self.parent = parent
        self.open: dict[str, _Open] = {}
        self.run_context = root

    def apply(self, records: Iterable[Record]) -> None:
        for record in records:
            if isinstance(record, SpanStart):
                self._start(record)
            elif isinstance(record, SpanEnd):
                self._end(record)
            else:
                self._event(record)

    def add_attributes(self, key: str, attributes: Attributes) -> None:
        span = self.open.get(key)
        if span is not None:
            span.attributes.update(attributes)

    def _start(self, record: SpanStart) -> None:
        if record.parent is None:
            parent = self.parent
            context = self.run_context
        else:
            owner = self.open.get(record.parent)
            parent = owner.context if owner is not None else self.run_context
            context = self.writer.ids.child(parent)
        self.open[record.key] = _Open(
            record.name, _KINDS[record.kind], context, parent, record.start_ns, record.attributes
        )

    def _end(self, record: SpanEnd) -> None:
        span = self.open.pop(record.key, None)
        if span is None:
            return
        attributes = span.attributes
        attributes.update(record.attributes)
        if span.dropped:
            attributes["loopgate.span.events_dropped"] = span.dropped
        self.writer.write(
            name=span.name,
            context=span.context,
            parent=span.parent,
            kind=span.kind,
            start_ns=span.start,
            end_ns=record.end_ns,
            attributes=attributes,
            events=span.events,
            error=record.error,
        )

    def _event(self, record: SpanEvent) -> None:
        span = self.open.get(record.key) or self.open.get(RUN)
        if span is None:
            return
        if len(span.events) >= MAX_EVENTS:
            span.dropped += 1
            return
        span.events.append(Event(record.name, record.attributes, timestamp=record.ts))
