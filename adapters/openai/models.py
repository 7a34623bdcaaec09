"""The model names ``/v1/models`` lists and which agent each one runs.

A model is an agent (contracts.agents): ``model`` names the agent a request runs, and every
agent the gateway serves is listed under its name. ``loopgate``, listed first, is the default
agent under any roster. A gateway serving one agent also answers to what its loop
is called, as it always has: its reference loop's model (``loopgate-scripted`` for the
embedded one, ``--openai-model`` for a real one) or a plugged loop's name
(``python:pkg.mod:attr``, ``http:URL``, ``stdio:COMMAND``).
"""

from __future__ import annotations

from ...contracts.agents import DEFAULT_AGENT
from ...contracts.ports import RunService

ALIAS = "loopgate"
# The reference loop's own name says nothing its model does not.
_UNNAMED = ("", "reference")


async def model_table(service: RunService) -> dict[str, str]:
    """Model id → the agent it runs, in the order ``/v1/models`` lists them."""
    agents = await service.agents()
    if not agents:
        # A run service without agents (another implementation of the port): its one loop.
        return {ALIAS: ""}
    default = agents[0].name
    table = {ALIAS: default}
    # An agent called loopgate is that agent, not the default.
    table.update((agent.name, agent.name) for agent in agents)
    if len(agents) == 1:
        for alias in (agents[0].model, agents[0].loop):
            if alias and alias not in _UNNAMED:
                table.setdefault(alias, default)
    return table


async def model_names(service: RunService) -> list[str]:
    """What ``/v1/models`` lists: every key of the table but the name ``default`` of a lone
    agent the flags defined (it is listed as ``loopgate``, as it always was)."""
    table = await model_table(service)
    if len(set(table.values())) == 1 and DEFAULT_AGENT in table:
        return [name for name in table if name != DEFAULT_AGENT]
    return list(table)
