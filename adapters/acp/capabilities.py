"""What an ACP connection advertises it takes in prompts (``promptCapabilities``), from the
agents its sessions run on (``AgentInfo.accepts``, docs/attachments.md).

A connection for one agent (``/agents/NAME/acp``, ``loopgate acp --agent NAME``, or a gateway
serving one) says what that agent takes: a client then sends no image to an agent that reads
text. A connection whose sessions choose among several agents advertises what any of them
takes: capabilities are settled at ``initialize``, before any session or agent is chosen, and
a session's agent can change with ``session/set_config_option``; advertising less would hide
images from the agents that read them. A prompt carrying a kind its session's agent does not
take is refused with -32602 naming the kind.

``embeddedContext`` is always true: an embedded text resource reaches every loop as text.
"""

from __future__ import annotations

from ...contracts.agents import AgentInfo
from ...contracts.parts import ATTACHMENT_KINDS


def taken_kinds(agents: list[AgentInfo]) -> frozenset[str]:
    """The attachment kinds any of ``agents`` takes; every kind when they are not known (a
    service that names no agents checks each prompt itself)."""
    if not agents or any(a.accepts is None for a in agents):
        return frozenset(ATTACHMENT_KINDS)
    return frozenset(kind for a in agents for kind in a.accepts or ())


def prompt_capabilities(agents: list[AgentInfo]) -> dict[str, bool]:
    kinds = taken_kinds(agents)
    return {"image": "image" in kinds, "audio": "audio" in kinds, "embeddedContext": True}
