"""The span side of telemetry: the hub side's messages in, finished spans out.

One :class:`TraceProjector` per traced run turns its events into span records, which
:class:`RunSpans` writes through the SDK's span processor. The book runs wherever the spans
are built: in the gateway's process (inline) or in the trace worker (``worker.py``).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind

from contracts.envelope import Envelope
from gateway.telemetry.gate import DeltaGate
from gateway.telemetry.projector import RUN, TraceContext, TraceProjector
from gateway.telemetry.spans import RunSpans, SpanWriter, from_span_ref
from gateway.telemetry.wire import DeliveryClosed, Message_, RunOpened, RunSummary

if TYPE_CHECKING:
    from gateway.hub import Run

log = logging.getLogger("loopgate.telemetry")

# A consumer name becomes part of an attribute key; adapters name themselves, but be strict.
_CONSUMER = re.compile(r"[^a-z0-9_]")


class _Traced:
    __slots__ = ("projector", "spans")

    def __init__(self, projector: TraceProjector, spans: RunSpans) -> None:
        self.projector = projector
        self.spans = spans


class TraceBook:
    """Open runs' projectors and spans. Never raises: a run whose trace fails is dropped."""

    def __init__(
        self,
        writer: SpanWriter,
        *,
        content: bool = False,
        max_content_chars: int = 16_384,
        max_open_spans: int = 1_024,
        max_runs: int = 100_000,
        owns_processor: bool = False,
    ) -> None:
        self.writer = writer
        self.content = content
        self.max_content_chars = max_content_chars
        self.max_open_spans = max_open_spans
        # Runs whose end never arrives (a producer that vanished with the hub) must not grow
        # the book without bound: past this many, the oldest is closed as truncated.
        self.max_runs = max_runs
        self.owns_processor = owns_processor
        self._runs: dict[str, _Traced] = {}

    def follow(self, run: Run) -> bool:
        """In-process, each event is a call into the book: only those that change a span."""
        run.observers.append(DeltaGate(run, self.put, self.content).event)
        return True

    def put(self, message: Message_) -> None:
        try:
            if type(message) is Envelope:
                self._event(message)
            elif isinstance(message, RunOpened):
                self._opened(message)
            elif isinstance(message, RunSummary):
                self._summary(message)
            elif isinstance(message, DeliveryClosed):
                self._delivery(message)
        except Exception:
            run_id = getattr(message, "run_id", None)
            log.exception("telemetry failed on run %s; its trace is dropped", run_id)
            if isinstance(run_id, str):
                self._runs.pop(run_id, None)

    async def pump(self) -> None:
        """Nothing to do in the background: every message was handled when it came."""

    def close(self) -> None:
        """End what is still open (as truncated) and flush the processor if it is ours."""
        for run_id in list(self._runs):
            traced = self._runs.pop(run_id)
            traced.spans.apply(traced.projector.close())
        if self.owns_processor:
            self.writer.processor.shutdown()

    def _opened(self, m: RunOpened) -> None:
        if not m.root.sampled:
            return
        root = from_span_ref(m.root)
        if len(self._runs) >= self.max_runs:
            oldest = next(iter(self._runs))
            traced = self._runs.pop(oldest)
            traced.spans.apply(traced.projector.close())
        projector = TraceProjector(
            TraceContext(
                run_id=m.run_id,
                thread_id=m.thread_id,
                source=m.source,
                created_at=m.created_at,
                agent_name=m.agent_name,
                provider_name=m.provider_name,
                input=m.input,
            ),
            content=self.content,
            max_content_chars=self.max_content_chars,
            max_open_spans=self.max_open_spans,
        )
        parent = from_span_ref(m.parent) if m.parent is not None else None
        spans = RunSpans(self.writer, parent, root)
        spans.apply(projector.start())
        self._runs[m.run_id] = _Traced(projector, spans)

    def _event(self, env: Envelope) -> None:
        traced = self._runs.get(env.run_id)
        if traced is None:
            return
        records = traced.projector.feed(env)
        if records:
            if traced.projector.ended:
                del self._runs[env.run_id]
            traced.spans.apply(records)

    def _summary(self, m: RunSummary) -> None:
        traced = self._runs.get(m.run_id)
        if traced is not None:
            traced.spans.add_attributes(RUN, delivery_summary(m))

    def _delivery(self, m: DeliveryClosed) -> None:
        parent = from_span_ref(m.parent)
        attributes: dict[str, Any] = {
            "loopgate.run.id": m.run_id,
            "loopgate.delivery.consumer": m.consumer,
            "loopgate.delivery.after": m.cursor - m.delivered,
            "loopgate.delivery.events": m.delivered,
            "loopgate.delivery.cursor": m.cursor,
            "loopgate.delivery.complete": m.complete,
        }
        error = None
        if m.cut_off_lag is not None:
            attributes["error.type"] = "cut_off"
            error = f"the subscriber fell more than {m.cut_off_lag} events behind and was cut off"
        self.writer.write(
            name=f"deliver {m.consumer}",
            context=self.writer.ids.child(parent),
            parent=parent,
            kind=SpanKind.INTERNAL,
            start_ns=m.start_ns,
            end_ns=m.end_ns,
            attributes=attributes,
            error=error,
        )


def delivery_summary(m: RunSummary) -> dict[str, Any]:
    """The run span's per-adapter delivery attributes: subscribers still streaming at the
    run's end count as served with what they had been handed (their own ``deliver`` spans
    have the final count)."""
    counts: dict[str, list[int]] = {}
    for consumer, served, cut, events in m.deliveries:
        c = counts.setdefault(consumer, [0, 0, 0])
        c[0] += served
        c[1] += cut
        c[2] += events
    attrs: dict[str, Any] = {"loopgate.delivery.consumers": sorted(counts)}
    for consumer, (served, cut, events) in counts.items():
        prefix = f"loopgate.delivery.{_CONSUMER.sub('_', consumer.lower())[:64]}"
        attrs[f"{prefix}.subscribers"] = served
        attrs[f"{prefix}.cut_offs"] = cut
        attrs[f"{prefix}.events_delivered"] = events
    return attrs
