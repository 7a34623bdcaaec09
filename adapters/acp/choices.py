"""The session config options an ACP session offers (``configOptions``): when loopgate asks
before running a tool, and, on a gateway serving several agents, which agent answers.

ACP clients render these as selectors and change them with ``session/set_config_option``;
the shapes are the schema's ``SessionConfigOptionSelect``.
"""

from __future__ import annotations

from typing import Any

from ...contracts.agents import AgentInfo, UnknownAgent
from ...contracts.ports import RunInfo
from ..shared.rpc_errors import INVALID_PARAMS
from .errors import AgentError

APPROVAL_OPTION = "approval"
AGENT_OPTION = "agent"
APPROVAL_CHOICES: dict[str, str] = {
    "auto": "When a tool needs approval",
    "always": "Before every tool call",
}


def approval_option(current: str) -> dict[str, Any]:
    return {
        "id": APPROVAL_OPTION,
        "name": "Ask before tools",
        "description": "When loopgate asks for permission before running a tool",
        "type": "select",
        "currentValue": current,
        "options": [{"value": v, "name": n} for v, n in APPROVAL_CHOICES.items()],
    }


class AgentMenu:
    """The agents a session chooses from (``RunService.agents()``, default first).

    With fewer than two there is nothing to choose: no option is offered and prompts name no
    agent, so the hub runs them as it always has.
    """

    def __init__(self, agents: list[AgentInfo]) -> None:
        self.agents = agents
        self.names = [a.name for a in agents]
        self.default = next((a.name for a in agents if a.default), self.names[0] if agents else "")

    @property
    def offered(self) -> bool:
        return len(self.agents) > 1

    def of_thread(self, newest: RunInfo | None) -> str | None:
        """The agent a session starts on: its thread's (that of its newest run), else the
        default; None when none is offered. A thread whose agent is no longer served goes on
        with the default: the selector shows it, so the choice is in plain sight."""
        if not self.offered:
            return None
        if newest is not None and newest.agent in self.names:
            return newest.agent
        return self.default

    def check(self, value: object) -> str:
        """``value`` if it names an agent served; UnknownAgent (naming them) if not."""
        if isinstance(value, str) and value in self.names:
            return value
        raise UnknownAgent(str(value), self.names)

    def option(self, current: str) -> dict[str, Any]:
        # Category "mode": an agent is a loop with its own prompt, tools and model, which is
        # what ACP's session modes select between (a "model" selector would promise the same
        # agent on another model).
        return {
            "id": AGENT_OPTION,
            "name": "Agent",
            "description": "The agent that answers this session's prompts",
            "category": "mode",
            "type": "select",
            "currentValue": current,
            "options": [choice(a) for a in self.agents],
        }


def choice(agent: AgentInfo) -> dict[str, Any]:
    # No empty description: the option has none, and a client shows none.
    described = {"description": agent.description} if agent.description else {}
    return {"value": agent.name, "name": agent.name, **described}


def chosen_agent(menu: AgentMenu, value: Any) -> str:
    """The agent ``value`` names; -32602 naming the agents served if none."""
    try:
        return menu.check(value)
    except UnknownAgent as exc:
        raise AgentError(
            INVALID_PARAMS,
            f"Invalid params: value: {exc.message}",
            {"field": "value", "agents": exc.known},
        ) from None
