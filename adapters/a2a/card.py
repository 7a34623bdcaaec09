"""The Agent Card: one per agent, at ``/.well-known/agent-card.json`` (the default agent) and
``/agents/{name}/.well-known/agent-card.json``; its interfaces are the paths beside it."""

from __future__ import annotations

from typing import Any

from loopgate import __version__

from ...contracts.agents import AgentInfo
from .wire import HTTP_JSON_BINDING, JSONRPC_BINDING, PROTOCOL_VERSION

CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a"
REST_PATH = "/a2a/rest"
MODES = ["text/plain", "application/json"]
# What a message may carry besides: files as raw bytes or a URL (docs/attachments.md); an agent
# that does not take a kind refuses it with ContentTypeNotSupported naming the kind.
INPUT_MODES = [*MODES, "image/*", "audio/*", "application/octet-stream"]


def agent_card(base_url: str, agent: AgentInfo, prefix: str, *, push: bool) -> dict[str, Any]:
    """``base_url`` (no trailing slash) as the client reached the gateway; ``prefix`` is
    ``""`` for the default agent's card, ``/agents/NAME`` for a named one's."""
    root = base_url + prefix
    description = agent.description or f"The {agent.name} agent ({agent.loop}) behind loopgate"
    return {
        "name": agent.name,
        "description": description,
        "version": __version__,
        "supportedInterfaces": [
            {
                "url": root + RPC_PATH,
                "protocolBinding": JSONRPC_BINDING,
                "protocolVersion": PROTOCOL_VERSION,
            },
            {
                "url": root + REST_PATH,
                "protocolBinding": HTTP_JSON_BINDING,
                "protocolVersion": PROTOCOL_VERSION,
            },
        ],
        "provider": {"organization": "loopgate", "url": base_url},
        "capabilities": {"streaming": True, "pushNotifications": push},
        # loopgate's credentials (the token, API keys, OIDC access tokens) go in one header.
        "securitySchemes": {
            "bearer": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "description": "the gateway's token, an API key or an OIDC access token "
                    "(a loopback gateway without credentials takes none)",
                }
            }
        },
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": MODES,
        "skills": [
            {
                "id": agent.name,
                "name": agent.name,
                "description": description,
                "tags": ["loopgate", agent.loop.split(":", 1)[0]],
            }
        ],
    }
