"""The agent a request's path names (``/agents/{name}/…``): known before anything starts."""

from __future__ import annotations

from ...contracts.agents import UnknownAgent
from ...contracts.ports import RunService

# Where a front end's routes for one agent live: ``/agents/{name}`` then the front end's own
# path (``/agents/parrot/agui``), as the clients that address agents by URL expect.
AGENT_PREFIX = "/agents/{name}"


async def served_agent(service: RunService, name: str | None) -> str | None:
    """``name`` when the gateway serves an agent by it, None when the path names none.

    Checked up front, not left to the start of a run: a request that starts none (an attach,
    a reconnect) to an agent that does not exist is as wrong, and a refused socket upgrade is
    clearer than an error frame after it. UnknownAgent names the agents served."""
    if name is None:
        return None
    known = [agent.name for agent in await service.agents()]
    if name not in known:
        raise UnknownAgent(name, known)
    return name
