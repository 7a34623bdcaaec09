"""Telemetry as one more consumer of the hub: runs, model requests, tool calls and delivery.

:class:`Telemetry` hooks into a hub (``run_observers``, ``observers``,
``subscription_observers``), feeds every accepted event of a run to its
:class:`~gateway.telemetry.projector.TraceProjector`, and applies the records to real spans.
Every hook swallows its own failures: telemetry never affects a run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from contracts.contract import is_terminal_completion
from contracts.envelope import Envelope
from gateway.settings import Settings
from gateway.telemetry.book import TraceBook
from gateway.telemetry.metrics import hub_meters
from gateway.telemetry.spans import (
    DEFAULT_SAMPLER,
    SpanWriter,
    TraceIds,
    parse_traceparent,
    span_ref,
)
from gateway.telemetry.wire import DeliveryClosed, Message_, RunOpened, RunSummary, SpanRef
from gateway.telemetry.worker import WorkerSink, WorkerSpec, build_processor

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

    from gateway.hub import Hub, Run, RunSubscription

log = logging.getLogger("loopgate.telemetry")

TRACE_ID_KEY = "trace_id"
TRACEPARENT_KEY = "traceparent"
TRACESTATE_KEY = "tracestate"
DEFAULT_SERVICE_NAME = "loopgate"
_NAME_MAX = 128


class TraceSink(Protocol):
    """Where the hub side's messages go: the span side in-process (:class:`TraceBook`) or
    the pipe to the trace worker (:class:`~gateway.telemetry.worker.WorkerSink`)."""

    def follow(self, run: Run) -> bool:
        """Have the run's events handed to the sink (an observer on the run, and the kinds it
        takes in ``run.observed``); False when the sink takes no more runs."""
        ...

    def put(self, message: Message_) -> None: ...

    async def pump(self) -> None:
        """Runs as long as the hub does (whatever the sink does in the background)."""
        ...

    def close(self) -> None: ...


class Telemetry:
    """Traces of every run of one hub (no global state): the hub side.

    It decides each run's trace context (clients are told of it at once), and hands the span
    side what it needs — the run's start, its events (deltas only when one would change a
    span), its subscriptions' ends — through a sink. With a ``processor`` (any SDK span
    processor: a ``BatchSpanProcessor`` around an OTLP exporter, a ``SimpleSpanProcessor``
    around an ``InMemorySpanExporter`` in tests) the spans are built in this process; with
    ``sink=WorkerSink(...)`` they are built in the trace worker, off the hub's core.
    """

    def __init__(
        self,
        processor: SpanProcessor | None = None,
        *,
        sink: TraceSink | None = None,
        resource: Resource | None = None,
        content: bool = False,
        max_content_chars: int = 16_384,
        max_open_spans: int = 1_024,
        loop_provider_name: str = "unknown",
        owns_processor: bool = False,
        sampler: Sampler = DEFAULT_SAMPLER,
        metric_reader: MetricReader | None = None,
    ) -> None:
        self.ids = TraceIds(sampler=sampler)
        self.resource = resource or Resource.create({"service.name": DEFAULT_SERVICE_NAME})
        # Metrics of the hub this is attached to, read by metric_reader (e.g. the OTLP one).
        self.metric_reader = metric_reader
        self.meters: MeterProvider | None = None
        if sink is None:
            if processor is None:
                raise TypeError("Telemetry needs a span processor or a sink")
            writer = SpanWriter(processor, self.resource, self.ids)
            sink = TraceBook(
                writer,
                content=content,
                max_content_chars=max_content_chars,
                max_open_spans=max_open_spans,
                owns_processor=owns_processor,
            )
        self.sink = sink
        self.content = content
        self.loop_provider_name = loop_provider_name
        # Traced runs still open: their run span's context.
        self._runs: dict[str, SpanRef] = {}
        # run id → consumer → [subscriptions, cut-offs, events delivered], for subscriptions
        # that closed before the run ended.
        self._closed: dict[str, dict[str, list[int]]] = {}
        self._finished_hook = self._finished
        self._deliveries: dict[RunSubscription, tuple[SpanRef, int]] = {}
        self._clock: Callable[[], int] = time.time_ns

    def attach(self, hub: Hub) -> None:
        self._clock = hub.clock
        hub.run_observers.append(self.run_started)
        hub.subscription_observers.append(self.subscription)
        hub.services.append(self.sink.pump)
        if self.metric_reader is not None:
            self.meters = hub_meters(hub, self.metric_reader, self.resource)

    def shutdown(self) -> None:
        """Flush and stop exporting (blocking, bounded by the exporters' timeouts)."""
        self.sink.close()
        if self.meters is not None:
            self.meters.shutdown()
        elif self.metric_reader is not None:  # never attached: stop its thread all the same
            self.metric_reader.shutdown()

    # --- hub hooks ----------------------------------------------------------------------

    def run_started(self, run: Run) -> None:
        try:
            record = run.record
            metadata = record.metadata
            traceparent = metadata.get(TRACEPARENT_KEY)
            parent = (
                parse_traceparent(traceparent, metadata.get(TRACESTATE_KEY))
                if traceparent
                else None
            )
            ref = self.ids.root_ref(parent)
            # Clients link to the dashboard with these, and continue the trace under the run
            # span (e.g. an external loop's own spans). An unsampled run gets them too, so
            # the caller's decision propagates to whatever continues the trace.
            metadata[TRACE_ID_KEY] = ref.trace_id
            metadata[TRACEPARENT_KEY] = f"00-{ref.trace_id}-{ref.span_id}-0{int(ref.sampled)}"
            if not ref.sampled or not self.sink.follow(run):
                return
            self._runs[run.id] = ref
            run.on_finish.append(self._finished_hook)
            self.sink.put(self._opened(run, ref, parent))
        except Exception:
            log.exception("telemetry could not start the trace of run %s", run.id)
            self._runs.pop(run.id, None)

    def event(self, run: Run, env: Envelope) -> None:
        """Hand over one of the run's events as the hub does, its end hooks first for the
        terminal one (for callers that feed runs by hand: tests with recorded timestamps)."""
        if is_terminal_completion(env.kind, env.data) and self._finished in run.on_finish:
            self._finished(run)
        if env.kind in run.observed:
            for observe in run.observers:
                observe(env)

    def _opened(self, run: Run, ref: SpanRef, parent: SpanContext | None) -> RunOpened:
        record = run.record
        metadata = record.metadata
        return RunOpened(
            run_id=run.id,
            thread_id=record.thread_id,
            source=record.source,
            created_at=record.created_at,
            agent_name=_name(metadata.get("agent_name")) or "loopgate",
            provider_name=_name(metadata.get("provider"))
            or (self.loop_provider_name if record.source == "loop" else "unknown"),
            root=ref,
            parent=span_ref(parent) if parent is not None else None,
            input=tuple(record.input) if self.content else (),
        )

    def _finished(self, run: Run) -> None:
        """The run's terminal event was accepted (before the sink is handed it): how it was
        delivered so far goes on the run span. Subscribers still reading are counted as of
        now, so this is taken here, not later."""
        try:
            del self._runs[run.id]
            deliveries = [(s.consumer, 1, int(s.cut_off), s.delivered) for s in run.subscribers]
            closed = self._closed.pop(run.id, None)
            if closed:
                deliveries += [(c, *counts) for c, counts in closed.items()]
            self.sink.put(RunSummary(run.id, deliveries))
        except Exception:
            log.exception("telemetry could not summarise the delivery of run %s", run.id)

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
        parent = self._runs.get(sub.run.id)
        if parent is None:
            # A finished run (or one from before a restart): its stored traceparent is the
            # run span's, so late subscribers still join the run's trace.
            metadata = sub.run.record.metadata
            if not metadata.get(TRACE_ID_KEY):
                return
            context = parse_traceparent(metadata.get(TRACEPARENT_KEY), metadata.get(TRACESTATE_KEY))
            if context is None or not context.trace_flags.sampled:
                return
            parent = span_ref(context)
        self._deliveries[sub] = (parent, self._clock())

    def _delivery_closed(self, sub: RunSubscription) -> None:
        run_id = sub.run.id
        if run_id in self._runs:
            by_consumer = self._closed.setdefault(run_id, {})
            counts = by_consumer.setdefault(sub.consumer, [0, 0, 0])
            counts[0] += 1
            counts[1] += int(sub.cut_off)
            counts[2] += sub.delivered
        delivery = self._deliveries.pop(sub, None)
        if delivery is not None:
            parent, start = delivery
            self.sink.put(_delivered(sub, parent, start, self._clock()))


def _delivered(sub: RunSubscription, parent: SpanRef, start_ns: int, end_ns: int) -> DeliveryClosed:
    """A closed subscription's ``deliver`` span (its counts are final)."""
    return DeliveryClosed(
        parent,
        sub.run.id,
        sub.consumer,
        start_ns,
        end_ns,
        sub.cursor,
        sub.delivered,
        sub.done,
        sub.max_lag if sub.cut_off else None,
    )


def _name(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:_NAME_MAX]
    return None


# --- construction from settings -------------------------------------------------------------


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


def worker_spec(settings: Settings, env: Mapping[str, str]) -> WorkerSpec | None:
    """What to export, from settings and OTEL_* variables; None when nothing would be."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    endpoint = traces_endpoint(settings, env)
    if endpoint is None and not settings.trace_console:
        return None
    return WorkerSpec(
        otlp_endpoint=endpoint,
        console=settings.trace_console,
        export_timeout_s=settings.otel_export_timeout_s,
        service_name=service_name(settings, env),
        content=settings.trace_content,
        max_content_chars=settings.trace_content_max_chars,
        max_open_spans=settings.trace_max_open_spans,
    )


def build_telemetry(settings: Settings, env: Mapping[str, str]) -> Telemetry | None:
    """Telemetry as configured, or None when nothing would be exported (the default).

    Spans are built and exported by the trace worker (a process of its own) unless
    ``trace_worker`` is off; then in this process, on the hub's core.
    """
    spec = worker_spec(settings, env)
    if spec is None:
        return None
    options: dict[str, Any] = {
        "content": settings.trace_content,
        "max_content_chars": settings.trace_content_max_chars,
        "max_open_spans": settings.trace_max_open_spans,
        "loop_provider_name": loop_provider_name(settings),
        "sampler": sampler_from_env(env),
    }
    options["resource"] = Resource.create({"service.name": spec.service_name})
    options["metric_reader"] = metric_reader(settings, env)
    if settings.trace_worker:
        return Telemetry(sink=WorkerSink(spec, max_queued=settings.trace_queue_max), **options)
    processor = build_processor(spec)
    assert processor is not None  # the spec names an exporter
    return Telemetry(processor, owns_processor=True, **options)


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
