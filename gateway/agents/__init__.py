"""Named agents: each a loop under a name, chosen per run (docs/agents.md)."""

from loopgate.gateway.agents.spec import AgentSpec
from loopgate.gateway.agents.table import Agent, Agents

__all__ = ["Agent", "AgentSpec", "Agents"]
