"""Named agents: each a loop under a name, chosen per run (docs/agents.md)."""

from .spec import AgentSpec
from .table import Agent, Agents

__all__ = ["Agent", "AgentSpec", "Agents"]
