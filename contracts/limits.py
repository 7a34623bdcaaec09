"""The bounds every endpoint enforces, handed to adapters by the gateway."""

from __future__ import annotations

import re

import msgspec

from .json_input import DEFAULT_MAX_DEPTH
from .outbound import OutboundPolicy
from .webhooks import Outbox

# A page served from this machine, as a browser serialises its origin: scheme, loopback name,
# optional port, nothing else. The one rule of the Origin guard, the WebSockets and CORS (whose
# middleware takes it as its origin regex).
LOOPBACK_ORIGIN = r"https?://(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]{1,5})?"
_LOOPBACK = re.compile(LOOPBACK_ORIGIN)


class EndpointLimits(msgspec.Struct, kw_only=True, frozen=True):
    max_body_bytes: int = 1 << 20
    max_line_bytes: int = 2 << 20
    max_frame_bytes: int = 2 << 20
    keepalive_s: float = 15.0
    # A client that takes longer than this to accept one write is cut off (it can resume).
    write_timeout_s: float = 30.0
    # The longest gap between the events of a streamed ingest body (its run ends past it too).
    ingest_idle_timeout_s: float = 300.0
    # How long a start waits for its thread's turn (multitask_strategy enqueue, or the end of
    # the run interrupt or rollback cancelled) before it is refused as ThreadBusy.
    thread_wait_s: float = 60.0
    # JSON nested deeper than this is refused where it enters (contracts.json_input).
    max_json_depth: int = DEFAULT_MAX_DEPTH
    # A JSON-RPC response (a batch's, a page of run.events) stops growing past this.
    max_batch_response_bytes: int = 8 << 20
    # WebSocket upgrades from browsers must come from one of these origins (exact match);
    # empty = loopback origins only. Clients that send no Origin (non-browsers) are allowed.
    allowed_origins: tuple[str, ...] = ()
    # Whether a client on the network may have the gateway start programs: the stdio MCP
    # servers an ACP client names in session/new.
    client_stdio_mcp: bool = False
    # Where a client on the network may have the gateway send requests (the http MCP servers
    # an ACP client names): only the operator's allowed_outbound (gateway/outbound.py).
    client_outbound: OutboundPolicy = msgspec.field(default_factory=OutboundPolicy)
    # Where webhooks (A2A push notifications) are sent from: the gateway's, which runs their
    # deliveries apart from any request; None where there is none (stdio), and no webhooks.
    outbox: Outbox | None = None

    def origin_allowed(self, origin: str | None) -> bool:
        """Browsers always send Origin; other clients may not, and cannot be attacked
        cross-site. Without a list, only pages served from this machine are trusted."""
        if origin is None:
            return True
        if self.allowed_origins:
            return origin in self.allowed_origins or "*" in self.allowed_origins
        return _LOOPBACK.fullmatch(origin) is not None
