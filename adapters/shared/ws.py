"""WebSocket checks shared by every adapter that accepts upgrades."""

from __future__ import annotations

from starlette.websockets import WebSocket

from contracts.limits import EndpointLimits


def origin_allowed(websocket: WebSocket, limits: EndpointLimits) -> bool:
    return limits.origin_allowed(websocket.headers.get("origin"))


async def refuse(websocket: WebSocket, reason: str) -> None:
    """Reject the upgrade before accepting (the client sees HTTP 403)."""
    await websocket.close(code=1008, reason=reason[:120])
