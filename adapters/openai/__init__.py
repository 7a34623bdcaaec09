"""OpenAI chat completions: a sans-IO projector from LoopEvents to ``chat.completion.chunk``s,
``POST /v1/chat/completions`` (streamed or not) and ``GET /v1/models``."""

from .adapter import ADAPTER, MEDIA_TYPE, OpenAIAdapter
from .projector import OpenAIProjector

__all__ = ["ADAPTER", "MEDIA_TYPE", "OpenAIAdapter", "OpenAIProjector"]
