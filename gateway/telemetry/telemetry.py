"""Telemetry as one more consumer of the hub: runs, model requests, tool calls and delivery.

:class:`Telemetry` hooks into a hub (``run_observers``, ``observers``,
``subscription_observers``), feeds every accepted event of a run to its
:class:`~gateway.telemetry.projector.TraceProjector`, and applies the records to real spans.
Every hook swallows its own failures: telemetry never affects a run.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import SpanContext, SpanKind

from contracts.envelope import Envelope
from gateway.settings import Settings
from gateway.telemetry.projector import DELTAS, RUN, TraceContext, TraceProjector
from gateway.telemetry.spans import (
    DEFAULT_SAMPLER,
    RunSpans,
    SpanWriter,
    format_traceparent,
    parse_traceparent,
)

if TYPE_CHECKING:
    from gateway.hub import Hub, Run, RunSubscription

log = logging.getLogger("loopgate.telemetry")

TRACE_ID_KEY = "trace_id"
TRACEPARENT_KEY = "traceparent"
DEFAULT_SERVICE_NAME = "loopgate"
# A consumer name becomes part of an attribute key; adapters name themselves, but be strict.
_CONSUMER = re.compile(r"[^a-z0-9_]")
_NAME_MAX = 128


class _Traced:
    __slots__ = ("consumers", "projector", "spans")

    def __init__(self, projector: TraceProjector, spans: RunSpans) -> None:
        self.projector = projector
        self.spans = spans
        # consumer → [subscribers served, cut-offs, events delivered] by closed subscriptions.
        self.consumers: dict[str, list[int]] = {}


class _Delivery:
    __slots__ = ("context", "parent", "start")

    def __init__(self, context: SpanContext, parent: SpanContext, start: int) -> None:
        self.context = context
        self.parent = parent
        self.start = start


class Telemetry:
    """Traces of every run of one hub, written to one span processor (no global state).

    ``processor`` is any SDK span processor: a ``BatchSpanProcessor`` around an OTLP exporter
    in production, a ``SimpleSpanProcessor`` around an ``InMemorySpanExporter`` in tests.
    """

    def __init__(
        self,
        processor: SpanProcessor,
        *,
        resource: Resource | None = None,
        content: bool = False,
        max_content_chars: int = 16_384,
        max_open_spans: int = 1_024,
        loop_provider_name: str = "unknown",
        owns_processor: bool = False,
        sampler: Sampler = DEFAULT_SAMPLER,
    ) -> None:
        self.writer = SpanWriter(
            processor,
            resource or Resource.create({"service.name": DEFAULT_SERVICE_NAME}),
            sampler=sampler,
        )
        self.content = content
        self.max_content_chars = max_content_chars
        self.max_open_spans = max_open_spans
        self.loop_provider_name = loop_provider_name
        self.owns_processor = owns_processor
        self._runs: dict[str, _Traced] = {}
        self._deliveries: dict[RunSubscription, _Delivery] = {}
        self._clock: Callable[[], int] = time.time_ns

    def attach(self, hub: Hub) -> None:
        self._clock = hub.clock
        hub.run_observers.append(self.run_started)
        hub.observers.append(self.event)
        hub.subscription_observers.append(self.subscription)

    def shutdown(self) -> None:
        """Flush and stop exporting (blocking, bounded by the exporter's timeout)."""
        if self.owns_processor:
            self.writer.processor.shutdown()

    # --- hub hooks ----------------------------------------------------------------------

    def run_started(self, run: Run) -> None:
        try:
            record = run.record
            metadata = record.metadata
            projector = TraceProjector(
                TraceContext(
                    run_id=run.id,
                    thread_id=record.thread_id,
                    source=record.source,
                    created_at=record.created_at,
                    agent_name=_name(metadata.get("agent_name")) or "loopgate",
                    provider_name=_name(metadata.get("provider"))
                    or (self.loop_provider_name if record.source == "loop" else "unknown"),
                    input=tuple(record.input) if self.content else (),
                ),
                content=self.content,
                max_content_chars=self.max_content_chars,
                max_open_spans=self.max_open_spans,
            )
            spans = RunSpans(self.writer, parse_traceparent(metadata.get(TRACEPARENT_KEY)))
            spans.apply(projector.start())
            if spans.run_context.trace_flags.sampled:
                self._runs[run.id] = _Traced(projector, spans)
                run.observe_deltas = projector.wants_deltas
            else:
                # Not recorded: no work per event; the ids still go out so a caller's
                # decision propagates to whatever continues the trace.
                run.observe_deltas = False
            # Clients link to the dashboard with these, and continue the trace under the run
            # span (e.g. an external loop's own spans).
            metadata[TRACE_ID_KEY] = f"{spans.run_context.trace_id:032x}"
            metadata[TRACEPARENT_KEY] = format_traceparent(spans.run_context)
        except Exception:
            log.exception("telemetry could not start the trace of run %s", run.id)
            self._runs.pop(run.id, None)

    def event(self, run: Run, env: Envelope) -> None:
        traced = self._runs.get(run.id)
        # Called for every event the hub accepts: most are deltas that change nothing.
        if traced is None or (env.kind in DELTAS and not traced.projector.wants_deltas):
            return
        try:
            records = traced.projector.feed(env)
            if not records:
                return
            if traced.projector.ended:
                del self._runs[run.id]
                traced.spans.add_attributes(RUN, _delivery_summary(run, traced))
            traced.spans.apply(records)
        except Exception:
            log.exception("telemetry failed on run %s; its trace is dropped", run.id)
            self._runs.pop(run.id, None)
        finally:
            current = self._runs.get(run.id)
            run.observe_deltas = current is not None and current.projector.wants_deltas

    def subscription(self, sub: RunSubscription, phase: str) -> None:
        try:
            if phase == "open":
                self._delivery_opened(sub)
            else:
                self._delivery_closed(sub)
        except Exception:
            log.exception("telemetry failed on a subscription of run %s", sub.run.id)
            self._deliveries.pop(sub, None)

    # --- delivery -----------------------------------------------------------------------

    def _delivery_opened(self, sub: RunSubscription) -> None:
        traced = self._runs.get(sub.run.id)
        if traced is not None:
            parent: SpanContext | None = traced.spans.run_context
        else:
            # A finished run (or one from before a restart): its stored traceparent is the
            # run span's, so late subscribers still join the run's trace.
            metadata = sub.run.record.metadata
            parent = parse_traceparent(metadata.get(TRACEPARENT_KEY))
            if not metadata.get(TRACE_ID_KEY):
                parent = None
        if parent is None or not parent.is_valid:
            return
        self._deliveries[sub] = _Delivery(self.writer.child(parent), parent, self._clock())

    def _delivery_closed(self, sub: RunSubscription) -> None:
        traced = self._runs.get(sub.run.id)
        if traced is not None:
            counts = traced.consumers.setdefault(sub.consumer, [0, 0, 0])
            counts[0] += 1
            counts[1] += int(sub.cut_off)
            counts[2] += sub.delivered
        delivery = self._deliveries.pop(sub, None)
        if delivery is None:
            return
        attributes: dict[str, Any] = {
            "loopgate.run.id": sub.run.id,
            "loopgate.delivery.consumer": sub.consumer,
            "loopgate.delivery.after": sub.cursor - sub.delivered,
            "loopgate.delivery.events": sub.delivered,
            "loopgate.delivery.cursor": sub.cursor,
            "loopgate.delivery.complete": sub.done,
        }
        error = None
        if sub.cut_off:
            attributes["error.type"] = "cut_off"
            error = f"the subscriber fell more than {sub.max_lag} events behind and was cut off"
        self.writer.write(
            name=f"deliver {sub.consumer}",
            context=delivery.context,
            parent=delivery.parent,
            kind=SpanKind.INTERNAL,
            start_ns=delivery.start,
            end_ns=self._clock(),
            attributes=attributes,
            error=error,
        )


def _delivery_summary(run: Run, traced: _Traced) -> dict[str, Any]:
    """Per-adapter delivery as of the run's end: subscribers still streaming count as served
    with what they had been handed so far (their own ``deliver`` spans have the final count)."""
    counts = {k: list(v) for k, v in traced.consumers.items()}
    for sub in run.subscribers:
        c = counts.setdefault(sub.consumer, [0, 0, 0])
        c[0] += 1
        c[1] += int(sub.cut_off)
        c[2] += sub.delivered
    attrs: dict[str, Any] = {"loopgate.delivery.consumers": sorted(counts)}
    for consumer, (served, cut, events) in counts.items():
        prefix = f"loopgate.delivery.{_CONSUMER.sub('_', consumer.lower())[:64]}"
        attrs[f"{prefix}.subscribers"] = served
        attrs[f"{prefix}.cut_offs"] = cut
        attrs[f"{prefix}.events_delivered"] = events
    return attrs


def _name(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:_NAME_MAX]
    return None


# --- construction from settings -------------------------------------------------------------


def traces_endpoint(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL: the setting or OTEL_EXPORTER_OTLP_ENDPOINT are base URLs
    (``/v1/traces`` is appended), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as given."""
    if settings.otel_endpoint:
        return _signal_url(settings.otel_endpoint)
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"].strip()
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
        return _signal_url(env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip())
    return None


def _signal_url(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def service_name(settings: Settings, env: Mapping[str, str]) -> str:
    return (
        settings.otel_service_name
        or env.get("OTEL_SERVICE_NAME", "").strip()
        or DEFAULT_SERVICE_NAME
    )


def sampler_from_env(env: Mapping[str, str]) -> Sampler:
    """The standard ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` variables."""
    name = env.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if not name:
        return DEFAULT_SAMPLER
    raw = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        ratio = float(raw) if raw else 1.0
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        log.warning("OTEL_TRACES_SAMPLER_ARG=%r is not a ratio from 0 to 1; using 1.0", raw)
        ratio = 1.0
    samplers: dict[str, Sampler] = {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "traceidratio": TraceIdRatioBased(ratio),
        "parentbased_always_on": ParentBased(ALWAYS_ON),
        "parentbased_always_off": ParentBased(ALWAYS_OFF),
        "parentbased_traceidratio": ParentBased(TraceIdRatioBased(ratio)),
    }
    if name not in samplers:
        log.warning(
            "OTEL_TRACES_SAMPLER=%r is not supported (use one of %s); following the caller",
            name,
            ", ".join(samplers),
        )
        return DEFAULT_SAMPLER
    return samplers[name]


def loop_provider_name(settings: Settings) -> str:
    """``gen_ai.provider.name`` of the reference loop's model calls."""
    return "openai" if settings.provider == "openai" else "loopgate.scripted"


def build_telemetry(settings: Settings, env: Mapping[str, str]) -> Telemetry | None:
    """Telemetry as configured, or None when nothing would be exported (the default)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    endpoint = traces_endpoint(settings, env)
    if endpoint is None and not settings.trace_console:
        return None
    timeout_ms = settings.otel_export_timeout_s * 1000
    processors: list[SpanProcessor] = []
    if endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # Batched: the exporter blocks on the network, so it runs in the processor's thread;
        # when the collector is down the bounded queue drops spans instead of growing.
        processors.append(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=endpoint, timeout=settings.otel_export_timeout_s),
                export_timeout_millis=timeout_ms,
            )
        )
    if settings.trace_console:
        processors.append(
            BatchSpanProcessor(
                ConsoleSpanExporter(out=sys.stderr), export_timeout_millis=timeout_ms
            )
        )
    processor: SpanProcessor = processors[0]
    if len(processors) > 1:
        multi = SynchronousMultiSpanProcessor()
        for p in processors:
            multi.add_span_processor(p)
        processor = multi
    return Telemetry(
        processor,
        resource=Resource.create({"service.name": service_name(settings, env)}),
        content=settings.trace_content,
        max_content_chars=settings.trace_content_max_chars,
        max_open_spans=settings.trace_max_open_spans,
        loop_provider_name=loop_provider_name(settings),
        owns_processor=True,
        sampler=sampler_from_env(env),
    )
