"""loopgate's native API: start, list, inspect, command and ingest runs over HTTP and WebSocket,
and their envelope stream as SSE, resumable with ``Last-Event-ID``."""

from loopgate.adapters.native.adapter import ADAPTER, NativeAdapter
from loopgate.adapters.native.projector import NativeProjector

__all__ = ["ADAPTER", "NativeAdapter", "NativeProjector"]
