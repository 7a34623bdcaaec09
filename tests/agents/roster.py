"""The two-agent gateway every front end's test drives: ``coder``, the reference loop on the
scripted model (the default), and ``parrot``, a plugged Python loop that repeats the prompt."""

from __future__ import annotations

from pathlib import Path

from loopgate.gateway.agents.spec import AgentSpec
from loopgate.gateway.settings import Settings
from tests.agents.parrot import PREFIX

__all__ = ["PREFIX", "TWO_AGENTS_TOML", "two_agent_settings", "write_two_agents"]

TWO_AGENTS_TOML = """\
scripted_delay_s = 0.0

[agents.coder]
description = "Writes and explains code"
default = true

[agents.parrot]
description = "Repeats what you say"
loop = "tests.agents.parrot:loop"
"""


def two_agent_settings(**overrides: object) -> Settings:
    agents = {
        "coder": AgentSpec(description="Writes and explains code", default=True),
        "parrot": AgentSpec(description="Repeats what you say", loop="tests.agents.parrot:loop"),
    }
    return Settings(**{"scripted_delay_s": 0.0, "agents": agents, **overrides})  # type: ignore[arg-type]


def write_two_agents(directory: Path) -> Path:
    path = directory / "loopgate.toml"
    path.write_text(TWO_AGENTS_TOML, encoding="utf-8")
    return path
