"""A2A (Agent2Agent) 1.0: every agent behind loopgate as an A2A server. An Agent Card per
agent, the JSON-RPC and HTTP+JSON bindings, and a sans-IO projector from LoopEvents to task
status and artifact updates."""

from .adapter import ADAPTER, MEDIA_TYPE, A2AAdapter
from .projector import A2AProjector

__all__ = ["ADAPTER", "MEDIA_TYPE", "A2AAdapter", "A2AProjector"]
