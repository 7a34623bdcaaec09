"""The Vercel AI SDK's UI message stream: a sans-IO projector from LoopEvents to UI message
chunks, ``POST /vercel`` for ``useChat``'s default transport and its reconnect."""

from .adapter import ADAPTER, MEDIA_TYPE, VercelAdapter
from .projector import VercelProjector

__all__ = ["ADAPTER", "MEDIA_TYPE", "VercelAdapter", "VercelProjector"]
