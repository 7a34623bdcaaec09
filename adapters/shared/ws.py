"""WebSocket checks shared by every adapter that accepts upgrades."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.websockets import WebSocket

from contracts.limits import EndpointLimits

_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


def origin_allowed(websocket: WebSocket, limits: EndpointLimits) -> bool:
    """Browsers always send Origin; other clients may not, and cannot be cross-site attacked."""
    origin = websocket.headers.get("origin")
    if origin is None:
        return True
    if limits.allowed_origins:
        return origin in limits.allowed_origins or "*" in limits.allowed_origins
    return (urlsplit(origin).hostname or "") in _LOOPBACK_HOSTS


async def refuse(websocket: WebSocket, reason: str) -> None:
    """Reject the upgrade before accepting (the client sees HTTP 403)."""
    await websocket.close(code=1008, reason=reason[:120])
