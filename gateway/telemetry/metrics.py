"""Metrics of a hub on an OpenTelemetry MeterProvider: what is running, who is watching, and
how many events went through (its rate is events/s).

The instruments are observable: nothing is counted on the hub's hot path beyond one integer
per event; the SDK's reader asks the hub (:meth:`~gateway.hub.Hub.stats`) when it collects,
every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (60 s by default), from its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource

if TYPE_CHECKING:
    from ..hub import Hub, HubStats

CONSUMER = "loopgate.delivery.consumer"


def hub_meters(hub: Hub, reader: MetricReader, resource: Resource) -> MeterProvider:
    """A provider (no global one is touched) whose instruments read ``hub``."""
    provider = MeterProvider(metric_readers=[reader], resource=resource)
    meter = provider.get_meter("loopgate")

    def observe(
        read: Callable[[HubStats], Iterable[Observation]],
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            return list(read(hub.stats()))

        return callback

    meter.create_observable_up_down_counter(
        "loopgate.runs.active",
        [observe(lambda s: [Observation(s.active_runs)])],
        unit="{run}",
        description="Runs started and not yet finished.",
    )
    meter.create_observable_counter(
        "loopgate.runs.started",
        [observe(lambda s: [Observation(s.runs_started)])],
        unit="{run}",
        description="Runs started since the gateway started.",
    )
    meter.create_observable_counter(
        "loopgate.events",
        [observe(lambda s: [Observation(s.events_accepted)])],
        unit="{event}",
        description="Events accepted into runs since the gateway started; its rate is events/s.",
    )
    # An adapter whose last subscriber left reads 0, not nothing: its series ends at zero.
    seen: set[str] = set()

    def subscribers(s: HubStats) -> list[Observation]:
        seen.update(s.subscribers)
        return [Observation(s.subscribers.get(c, 0), {CONSUMER: c}) for c in sorted(seen)]

    meter.create_observable_up_down_counter(
        "loopgate.subscribers",
        [observe(subscribers)],
        unit="{subscriber}",
        description="Open subscriptions to runs, by the adapter serving them.",
    )
    return provider
