"""Runs, fan-out and back-pressure."""

from loopgate.gateway.hub.hub import Hub, HubStats, Source
from loopgate.gateway.hub.run import Producer, Run, RunSubscription

__all__ = ["Hub", "HubStats", "Producer", "Run", "RunSubscription", "Source"]
