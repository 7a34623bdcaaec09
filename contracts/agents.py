"""The agents a gateway serves, as front ends see them: names to pick one by, and what each is.

An agent is one loop under a name (``[agents.NAME]`` in the config file; the ``--loop``-style
flags define one named ``default``). Front ends address agents by these names: the OpenAI
``model``, an AG-UI or Vercel path, an ACP session config option, a JSON-RPC ``agent`` field,
an MCP tool.
"""

from __future__ import annotations

import re

import msgspec

from .client_errors import ClientError

# Agent names go into URL paths, model ids and tool names: a conservative alphabet.
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The agent the ``--loop``-style flags (or top-level keys) define.
DEFAULT_AGENT = "default"


class AgentInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    description: str = ""
    # The loop's own name: ``reference``, ``python:pkg.mod:attr``, ``http:URL``, ``stdio:CMD``.
    loop: str
    # The reference loop's model (``loopgate-scripted`` for the embedded one); None for a
    # plugged loop, which names its model in its runs' events if at all.
    model: str | None = None
    # The agent a request that names none goes to.
    default: bool = False
    # The attachment kinds it takes besides text (contracts/parts.py); None: every kind.
    accepts: list[str] | None = None


class UnknownAgent(ClientError):
    """A request named an agent this gateway does not serve; ``known`` are the ones it does.

    A client's error (JSON-RPC's invalid params, naming the agents served), which each front
    end answers in its protocol's "not found" where it has one (HTTP 404, OpenAI's
    ``model_not_found``)."""

    def __init__(self, name: str, known: list[str], detail: str | None = None) -> None:
        self.name = name
        self.known = known
        served = ", ".join(known) if known else "none"
        super().__init__(
            detail or f"no agent named {name[:100]!r}; this gateway serves: {served}",
            field="agent",
        )


def check_agent_name(name: str) -> str:
    """``name`` if it is one agents may have; ValueError saying why not."""
    if not AGENT_NAME.fullmatch(name):
        raise ValueError(
            f"agent name {name[:100]!r} must be 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name
