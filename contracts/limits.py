"""The bounds every endpoint enforces, handed to adapters by the gateway."""

from __future__ import annotations

import msgspec


class EndpointLimits(msgspec.Struct, kw_only=True, frozen=True):
    max_body_bytes: int = 1 << 20
    max_line_bytes: int = 2 << 20
    max_frame_bytes: int = 2 << 20
    keepalive_s: float = 15.0
    # A client that takes longer than this to accept one write is cut off (it can resume).
    write_timeout_s: float = 30.0
    # WebSocket upgrades from browsers must come from one of these origins (exact match);
    # empty = loopback origins only. Clients that send no Origin (non-browsers) are allowed.
    allowed_origins: tuple[str, ...] = ()
