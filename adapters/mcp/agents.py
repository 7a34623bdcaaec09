"""The tools of a gateway that serves several agents: one tool per agent, and ``run``'s ``agent``.

A gateway serving one agent offers the four tools of :mod:`.tools`, as it always has. One that
serves several (``[agents.NAME]`` tables, docs/config.md) also offers each agent as a tool named
after it, described by the agent's description: calling it runs that agent. Agent names are
already tool names as MCP has them (1-64 letters, digits, ``_``, ``-`` and ``.``), so a name is
used as it is; an agent named like one of the four tools gets no tool of its own (the four keep
their meaning) and is run with ``run``'s ``agent``, which names any of them.

The menu is made per request from the run service's agents: a reload may change them, and a
client that lists the tools again sees the change. The server announces no ``listChanged``:
over stateless HTTP nothing could carry the notification.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ...contracts.agents import AgentInfo
from .tools import RUN, TOOLS, RunArgs

_RUN_TOOL = TOOLS[0]
# The tools an agent's name may not take: theirs is fixed.
TAKEN = frozenset(tool["name"] for tool in TOOLS)


class PickArgs(RunArgs, forbid_unknown_fields=True):
    """``run``'s arguments on a gateway with several agents: the agent, or the default."""

    agent: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None


class Runner(msgspec.Struct, frozen=True):
    """How a ``tools/call`` of a tool that starts runs reads its arguments and which agent it
    runs: ``agent`` for an agent's own tool; None for ``run``, whose arguments may name one
    (``PickArgs``), else the thread's agent (or the default) runs. ``tells``: the result's
    ``_meta.loopgate`` names the agent that ran (on a gateway with several)."""

    args: type[RunArgs] = RunArgs
    agent: str | None = None
    tells: bool = False

    def agent_of(self, args: RunArgs) -> str | None:
        return args.agent if isinstance(args, PickArgs) else self.agent


SINGLE = Runner()


class Menu:
    """The tools offered for ``agents`` (the run service's, the default first)."""

    def __init__(self, agents: list[AgentInfo]) -> None:
        self.several = len(agents) > 1
        self.runners: dict[str, Runner] = {RUN: SINGLE}
        if not self.several:
            self.tools: list[dict[str, Any]] = TOOLS
            return
        self.runners[RUN] = Runner(PickArgs, tells=True)
        own = [agent for agent in agents if agent.name not in TAKEN]
        for agent in own:
            self.runners[agent.name] = Runner(agent=agent.name, tells=True)
        self.tools = [run_tool(agents), *TOOLS[1:], *(agent_tool(agent) for agent in own)]

    def runner(self, tool: str) -> Runner | None:
        """How a call of ``tool`` starts its run; None when ``tool`` starts none here."""
        return self.runners.get(tool)


def run_tool(agents: list[AgentInfo]) -> dict[str, Any]:
    """``run`` with an ``agent`` to choose: any agent served (an enum of their names)."""
    default = next((a.name for a in agents if a.default), agents[0].name)
    names = [agent.name for agent in agents]
    choice = {
        "type": "string",
        "enum": names,
        "description": f"The agent to run: {', '.join(names)} (each is a tool of its own too). "
        f"Leave it out for the thread's agent when continuing a thread, else {default}, the "
        "default.",
    }
    schema = _RUN_TOOL["inputSchema"]
    return {
        **_RUN_TOOL,
        "description": "Run an agent on a prompt and return its answer (which agent: `agent`). "
        "Progress notifications report each step while it runs (the answer so far, the tools "
        "it calls). A run that asks the user a question returns the question: answer it with "
        "another run on the same thread_id.",
        "inputSchema": {**schema, "properties": {**schema["properties"], "agent": choice}},
    }


def agent_tool(agent: AgentInfo) -> dict[str, Any]:
    """The tool that runs ``agent``: its name, its description, ``run``'s arguments and
    annotations; ``_meta.loopgate.agent`` says which agent it runs."""
    fallback = f"Run the agent {agent.name} on a prompt and return its answer."
    return {
        "name": agent.name,
        "title": agent.name,
        "description": agent.description or fallback,
        "inputSchema": _RUN_TOOL["inputSchema"],
        "annotations": {**_RUN_TOOL["annotations"], "title": agent.name},
        "_meta": {"loopgate": {"agent": agent.name}},
    }
