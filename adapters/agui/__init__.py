"""AG-UI 1.0: a sans-IO projector from LoopEvents to AG-UI events, and their SSE encoding."""

from adapters.agui.adapter import ADAPTER, AguiAdapter
from adapters.agui.encoder import KEEPALIVE, MEDIA_TYPE, SseEncoder, sse_frames
from adapters.agui.projector import PROTOCOL_VERSION, AguiProjector

__all__ = [
    "ADAPTER",
    "KEEPALIVE",
    "MEDIA_TYPE",
    "PROTOCOL_VERSION",
    "AguiAdapter",
    "AguiProjector",
    "SseEncoder",
    "sse_frames",
]
