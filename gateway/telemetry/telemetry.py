"""Telemetry as one more consumer of the hub: runs, model requests, tool calls and delivery.

:class:`Telemetry` hooks into a hub (``run_observers``, a traced run's ``observers`` and
``on_finish``, ``delivery.observers``), feeds a traced run's events to its
:class:`~gateway.telemetry.projector.TraceProjector` and turns the records into spans of the
SDK tracer provider it was given (``gateway/telemetry/spans.py``). Every hook swallows its own
failures: telemetry never affects a run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.trace import set_span_in_context

from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import Envelope
from ...contracts.principal import LOCAL, Owner
from .delivery import Deliveries, delivery_summary, served_now
from .metrics import hub_meters
from .projector import SPAN_KINDS, TRACED_KINDS, TraceProjector
from .records import TraceContext
from .spans import (
    RunSpans,
    parent_context,
    parse_traceparent,
    traceparent_of,
)

if TYPE_CHECKING:
    from ..hub import Hub, Run, RunSubscription

log = logging.getLogger("loopgate.telemetry")

TRACE_ID_KEY = "trace_id"
TRACEPARENT_KEY = "traceparent"
TRACESTATE_KEY = "tracestate"
DEFAULT_SERVICE_NAME = "loopgate"
_NAME_MAX = 128


class Telemetry:
    """Traces of every run of one hub, through one SDK ``TracerProvider`` (never the global).

    Give it a ``provider`` configured as you like (processors, sampler, resource, limits), or
    a ``processor`` to put on a provider of its own (the sampler then is ``sampler``, else the
    SDK's: ``OTEL_TRACES_SAMPLER``). :meth:`shutdown` shuts the provider down.
    """

    def __init__(
        self,
        processor: SpanProcessor | None = None,
        *,
        provider: TracerProvider | None = None,
        sampler: Sampler | None = None,
        resource: Resource | None = None,
        content: bool = False,
        max_content_chars: int = 16_384,
        max_open_spans: int = 1_024,
        loop_provider_name: str = "unknown",
        metric_reader: MetricReader | None = None,
        shutdown_timeout_s: float = 30.0,
    ) -> None:
        if provider is None:
            provider = TracerProvider(
                sampler=sampler,
                resource=resource or Resource.create({"service.name": DEFAULT_SERVICE_NAME}),
                shutdown_on_exit=False,
            )
        if processor is not None:
            provider.add_span_processor(processor)
        self.provider = provider
        self.tracer = provider.get_tracer("loopgate")
        self.content = content
        self.max_content_chars = max_content_chars
        self.max_open_spans = max_open_spans
        self.loop_provider_name = loop_provider_name
        self.shutdown_timeout_s = shutdown_timeout_s
        # Metrics of the hub this is attached to, read by metric_reader (e.g. the OTLP one).
        self.metric_reader = metric_reader
        self.meters: MeterProvider | None = None
        self._clock: Callable[[], int] = time.time_ns
        # The hub attached to: its roster names each run's agent and model provider.
        self._hub: Hub | None = None
        self._runs: dict[str, _Traced] = {}
        self._deliveries = Deliveries(self.tracer, self._now)

    def attach(self, hub: Hub) -> None:
        self._clock = hub.clock
        self._hub = hub
        hub.run_observers.append(self.run_started)
        hub.delivery.observers.append(self.subscription)
        if self.metric_reader is not None:
            self.meters = hub_meters(hub, self.metric_reader, self.provider.resource)

    def shutdown(self) -> None:
        """End what is still open, flush and stop exporting. Blocking, for at most
        ``shutdown_timeout_s`` (a collector that is down): spans still unsent then are lost."""
        try:
            for traced in list(self._runs.values()):
                traced.close()
            self._deliveries.close()
        except Exception:
            log.exception("telemetry could not end the spans still open")
        stopping = threading.Thread(target=self._stop_providers, daemon=True)
        stopping.start()
        stopping.join(self.shutdown_timeout_s)
        if stopping.is_alive():
            log.warning(
                "telemetry could not export its last spans in %.1f s; they are dropped",
                self.shutdown_timeout_s,
            )

    def _stop_providers(self) -> None:
        self.provider.shutdown()
        if self.meters is not None:
            self.meters.shutdown()
        elif self.metric_reader is not None:  # never attached: stop its thread all the same
            self.metric_reader.shutdown()

    @contextmanager
    def scope(self, run_id: str, key: str) -> Iterator[None]:
        """Make a run's open span current in the caller's task while the block runs, so that
        spans started in it (an instrumented HTTP client's, a tool's own) are its children.

        ``key`` is the projector's: ``chat.<n>`` (the run's n-th model request), ``chat``
        (its model request open now), ``tool.<call id>``. Enter it after the event that opens
        the span (``llm_request``, ``tool_call_start``) was published, and leave it in the
        task that entered it: a ``with`` around the request or the call, not around an async
        generator's ``yield`` (another task may resume or close the generator). Nothing
        happens when the run is not traced or the span is not open.
        """
        traced = self._runs.get(run_id)
        span = traced.spans.span(key) if traced is not None else None
        if span is None:
            yield
            return
        token = otel_context.attach(set_span_in_context(span))
        try:
            yield
        finally:
            otel_context.detach(token)

    # --- hub hooks ----------------------------------------------------------------------

    def run_started(self, run: Run) -> None:
        """A run was created: its run span is started (the sampler decides), clients are told
        its ids (``trace_id``/``traceparent`` in the run's metadata, sampled or not, so the
        decision propagates) and, if it records, the run's events are handed here."""
        try:
            metadata = run.record.metadata
            parent = (
                parse_traceparent(metadata[TRACEPARENT_KEY], metadata.get(TRACESTATE_KEY))
                if metadata.get(TRACEPARENT_KEY)
                else None
            )
            traced = _Traced(self, run, self._projector(run), parent_context(parent))
            root = traced.spans.run
            assert root is not None
            metadata[TRACE_ID_KEY] = f"{root.get_span_context().trace_id:032x}"
            metadata[TRACEPARENT_KEY] = traceparent_of(root)
            if root.is_recording():
                self._runs[run.id] = traced
                run.on_finish.append(traced.finished)
                run.observers.append(traced.event)
                run.want(traced, SPAN_KINDS)
        except Exception:
            log.exception("telemetry could not start the trace of run %s", run.id)
            self._runs.pop(run.id, None)

    def event(self, run: Run, env: Envelope) -> None:
        """Hand over one of the run's events as the hub does, its end hooks first for the
        terminal one (for callers that feed runs by hand: tests with recorded timestamps)."""
        if is_terminal_completion(env.kind, env.data):
            for hook in run.on_finish:
                hook(run)
        if env.kind in run.observed:
            for observe in run.observers:
                observe(env)

    def subscription(self, sub: RunSubscription, phase: str) -> None:
        try:
            if phase == "open":
                parent = self._delivery_parent(sub.run)
                if parent is not None:
                    self._deliveries.opened(sub, parent)
            else:
                traced = self._runs.get(sub.run.id)
                if traced is not None:
                    traced.subscription_closed(sub)
                self._deliveries.closed(sub)
        except Exception:
            log.exception("telemetry failed on a subscription of run %s", sub.run.id)
            self._deliveries.forget(sub)

    # --- helpers ------------------------------------------------------------------------

    def _now(self) -> int:
        return self._clock()

    def _projector(self, run: Run) -> TraceProjector:
        record = run.record
        metadata = record.metadata
        who = _enduser(record.owner)
        roster = self._hub.roster if self._hub is not None else None
        agent = roster.get(record.agent) if roster is not None and record.agent else None
        return TraceProjector(
            TraceContext(
                run_id=run.id,
                thread_id=record.thread_id,
                source=record.source,
                created_at=record.created_at,
                agent_name=_name(metadata.get("agent_name"))
                or (agent.trace_name if agent is not None else "loopgate"),
                provider_name=_name(metadata.get("provider"))
                or (agent.provider_name if agent is not None else None)
                or (self.loop_provider_name if record.source == "loop" else "unknown"),
                input=tuple(record.input) if self.content else (),
                enduser_id=who.subject if who is not None else None,
                tenant=who.tenant if who is not None else None,
            ),
            content=self.content,
            max_content_chars=self.max_content_chars,
            max_open_spans=self.max_open_spans,
        )

    def _delivery_parent(self, run: Run) -> Context | None:
        traced = self._runs.get(run.id)
        if traced is not None and traced.spans.run is not None:
            return traced.spans.run_context
        # A finished run (or one from before a restart): its stored traceparent is the run
        # span's, so late subscribers still join the run's trace.
        metadata = run.record.metadata
        if not metadata.get(TRACE_ID_KEY):
            return None
        stored = parse_traceparent(metadata.get(TRACEPARENT_KEY), metadata.get(TRACESTATE_KEY))
        if stored is None or not stored.trace_flags.sampled:
            return None
        return parent_context(stored)


class _Traced:
    """One traced run: its projector, its spans, and its subscriptions that closed already.

    :meth:`event` is the run's observer. A model call's deltas change a span only at the
    first (its time to first chunk) unless content capture is on, and deltas are most of a
    stream: while the projector does not want them (``wants_deltas``: after that first delta,
    and outside model calls) the run's ``observed`` kinds narrow to the span kinds, so the hub
    skips the calls in between; the next ``llm_request`` widens them again.
    """

    __slots__ = ("closed", "dead", "owner", "projector", "run", "spans")

    def __init__(
        self, owner: Telemetry, run: Run, projector: TraceProjector, parent: Context
    ) -> None:
        self.owner = owner
        self.run = run
        self.projector = projector
        self.spans = RunSpans(owner.tracer, parent)
        self.spans.apply(projector.start())
        # consumer → [subscriptions, cut-offs, events delivered] of closed subscriptions
        self.closed: dict[str, list[int]] = {}
        # Ended, or dropped after a failure: the hub may still hand it events (an observer
        # never takes itself off the list the hub is iterating).
        self.dead = False

    def event(self, env: Envelope) -> None:
        if self.dead:
            return
        try:
            projector = self.projector
            records = projector.feed(env)
            self.run.want(self, TRACED_KINDS if projector.wants_deltas else SPAN_KINDS)
            if records:
                self.spans.apply(records)
                if projector.finished:
                    self._forget()
        except Exception:
            log.exception("telemetry failed on run %s; its trace is dropped", self.run.id)
            self._forget()

    def finished(self, run: Run) -> None:
        """The run's terminal event was accepted, not yet projected: how it was delivered so
        far goes on the run span (subscribers still reading count as of now)."""
        if self.dead:
            return
        try:
            served = served_now(run.subscribers)
            served += [(c, n[0], n[1], n[2]) for c, n in self.closed.items()]
            if self.spans.run is not None:
                self.spans.run.set_attributes(delivery_summary(served))
        except Exception:
            log.exception("telemetry could not summarise the delivery of run %s", run.id)

    def subscription_closed(self, sub: RunSubscription) -> None:
        counts = self.closed.setdefault(sub.consumer, [0, 0, 0])
        counts[0] += 1
        counts[1] += int(sub.cut_off)
        counts[2] += sub.delivered

    def close(self) -> None:
        """End the run's spans as if the stream stopped here (truncated)."""
        try:
            self.spans.apply(self.projector.close())
        finally:
            self._forget()

    def _forget(self) -> None:
        self.dead = True
        self.owner._runs.pop(self.run.id, None)


def _enduser(owner: Owner | None) -> Owner | None:
    """The owner the run's spans name. The machine's own user (no credential configured, a
    stdio command) is nobody in particular: its runs name no one."""
    if owner is None or owner == LOCAL.owner:
        return None
    return owner


def _name(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:_NAME_MAX]
    return None
