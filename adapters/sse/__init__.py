"""Native LoopEvent SSE: the envelope stream as it is, resumable with ``Last-Event-ID``."""

from adapters.sse.adapter import ADAPTER, SseAdapter

__all__ = ["ADAPTER", "SseAdapter"]
