"""Delivery: a ``deliver {adapter}`` span per subscription, and per-adapter counts on the run
span as of the run's end (docs/telemetry.md, "Delivery: why one span per subscriber")."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from .records import Attributes

if TYPE_CHECKING:
    from ..hub import RunSubscription

# A consumer name becomes part of an attribute key; adapters name themselves, but be strict.
_CONSUMER = re.compile(r"[^a-z0-9_]")

# (consumer, subscriptions, cut-offs, events delivered)
Served = tuple[str, int, int, int]


class Deliveries:
    """Open ``deliver`` spans, by subscription."""

    def __init__(self, tracer: Tracer, clock: Callable[[], int]) -> None:
        self.tracer = tracer
        self.clock = clock
        self._open: dict[RunSubscription, Span] = {}

    def opened(self, sub: RunSubscription, parent: Context) -> None:
        self._open[sub] = self.tracer.start_span(
            f"deliver {sub.consumer}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "loopgate.run.id": sub.run.id,
                "loopgate.delivery.consumer": sub.consumer,
            },
            start_time=self.clock(),
        )

    def closed(self, sub: RunSubscription) -> None:
        span = self._open.pop(sub, None)
        if span is None:
            return
        span.set_attributes(
            {
                "loopgate.delivery.after": sub.cursor - sub.delivered,
                "loopgate.delivery.events": sub.delivered,
                "loopgate.delivery.cursor": sub.cursor,
                "loopgate.delivery.complete": sub.done,
            }
        )
        if sub.cut_off:
            span.set_attribute("error.type", "cut_off")
            span.set_status(
                Status(
                    StatusCode.ERROR,
                    f"the subscriber fell more than {sub.max_lag} events behind and was cut off",
                )
            )
        span.end(end_time=self.clock())

    def forget(self, sub: RunSubscription) -> None:
        self._open.pop(sub, None)

    def close(self) -> None:
        """End the spans of subscriptions still open (the telemetry is shutting down)."""
        for sub in list(self._open):
            self.closed(sub)


def served_now(subs: Iterable[RunSubscription]) -> list[Served]:
    """Subscriptions still streaming count as served with what they had been handed."""
    return [(s.consumer, 1, int(s.cut_off), s.delivered) for s in subs]


def delivery_summary(served: Iterable[Served]) -> Attributes:
    """The run span's per-adapter delivery attributes (each subscription's own ``deliver``
    span has its final count)."""
    counts: dict[str, list[int]] = {}
    for consumer, subscriptions, cut_offs, events in served:
        c = counts.setdefault(consumer, [0, 0, 0])
        c[0] += subscriptions
        c[1] += cut_offs
        c[2] += events
    attrs: Attributes = {"loopgate.delivery.consumers": sorted(counts)}
    for consumer, (subscriptions, cut_offs, events) in counts.items():
        prefix = f"loopgate.delivery.{_CONSUMER.sub('_', consumer.lower())[:64]}"
        attrs[f"{prefix}.subscribers"] = subscriptions
        attrs[f"{prefix}.cut_offs"] = cut_offs
        attrs[f"{prefix}.events_delivered"] = events
    return attrs
