"""loopgate's native API: start, list, inspect, command and ingest runs over HTTP and WebSocket,
and their envelope stream as SSE, resumable with ``Last-Event-ID``."""

from .adapter import ADAPTER, NativeAdapter
from .projector import NativeProjector

__all__ = ["ADAPTER", "NativeAdapter", "NativeProjector"]
