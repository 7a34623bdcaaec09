"""WebSocket checks and endings shared by every adapter that accepts upgrades."""

from __future__ import annotations

import contextlib
import logging

import anyio
from starlette.websockets import WebSocket, WebSocketState

from ...contracts.limits import EndpointLimits
from .problem import HttpProblem, from_problem

# How long a closing handshake may wait on a client that does not read.
CLOSE_TIMEOUT_S = 1.0


def origin_allowed(websocket: WebSocket, limits: EndpointLimits) -> bool:
    return limits.origin_allowed(websocket.headers.get("origin"))


async def refuse(websocket: WebSocket, reason: str) -> None:
    """Reject the upgrade before accepting (the client sees HTTP 403)."""
    await websocket.close(code=1008, reason=reason[:120])


async def deny(websocket: WebSocket, problem: HttpProblem) -> None:
    """Reject the upgrade with the problem's status and JSON body, where the server can send
    one (uvicorn can); a refused upgrade (403) with its detail as the close reason otherwise."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(from_problem(problem))
    else:
        await refuse(websocket, problem.detail)


def client_of(websocket: WebSocket) -> str:
    client = websocket.scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown"


def report_cut_off(log: logging.Logger, protocol: str, websocket: WebSocket, waited: float) -> None:
    """The one line a client that stopped reading costs the log."""
    log.warning(
        "cut off the %s WebSocket client %s: it accepted no message for %gs",
        protocol,
        client_of(websocket),
        waited,
    )


def open_both_ways(websocket: WebSocket) -> bool:
    """Nobody has closed it: not the client (or the server for it: its receive would have
    said so), not the application (a close sent, or a send that found the connection gone).
    Only then is a close frame ours to send."""
    connected = WebSocketState.CONNECTED
    return websocket.client_state == connected and websocket.application_state == connected


async def close_stopped_reader(websocket: WebSocket) -> None:
    """Close with 1008 a socket whose client stopped reading, without waiting on it: the close
    frame queues behind what it left unread (the server aborts the connection later)."""
    if not open_both_ways(websocket):
        return
    # Exception: gone meanwhile, whichever way Starlette reports it.
    with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True), contextlib.suppress(Exception):
        await websocket.close(1008, "client stopped reading")
