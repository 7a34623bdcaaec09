"""Runs, fan-out and back-pressure."""

from gateway.hub.hub import Hub, Source
from gateway.hub.run import Producer, Run, RunSubscription

__all__ = ["Hub", "Producer", "Run", "RunSubscription", "Source"]
