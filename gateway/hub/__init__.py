"""Runs, fan-out and back-pressure."""

from .hub import Hub, HubStats, Source
from .run import Producer, Run, RunSubscription

__all__ = ["Hub", "HubStats", "Producer", "Run", "RunSubscription", "Source"]
