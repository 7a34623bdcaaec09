"""Where clients may have the gateway send requests, from the settings (``allowed_outbound``).

The one place that decides it: ACP sessions' http MCP servers today (through
``EndpointLimits.client_outbound``, as adapters import no gateway module), A2A push webhooks
and attachment URLs later. The matching rules are contracts/outbound.py's.
"""

from __future__ import annotations

from typing import Protocol

from ..contracts.outbound import OutboundPolicy


class OutboundSettings(Protocol):
    @property
    def allowed_outbound(self) -> list[str]: ...

    @property
    def has_credentials(self) -> bool: ...


def outbound_policy(settings: OutboundSettings) -> OutboundPolicy:
    """For clients of the network endpoints. A gateway with no credential configured serves
    only its own machine's user (loopback; Settings.check_listening), who could reach any URL
    themselves: unrestricted, as before the list existed."""
    return OutboundPolicy(
        allowed=tuple(settings.allowed_outbound), unrestricted=not settings.has_credentials
    )


def outbound_allowed(url: str, settings: OutboundSettings) -> bool:
    return outbound_policy(settings).allows(url)
