"""AG-UI 1.0: a sans-IO projector from LoopEvents to AG-UI events, and their SSE encoding."""

from .adapter import ADAPTER, MEDIA_TYPE, AguiAdapter
from .projector import PROTOCOL_VERSION, AguiProjector

__all__ = [
    "ADAPTER",
    "MEDIA_TYPE",
    "PROTOCOL_VERSION",
    "AguiAdapter",
    "AguiProjector",
]
