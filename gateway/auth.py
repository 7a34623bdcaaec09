"""Request guards as pure ASGI middleware (streams pass through untouched): the bearer token
on every endpoint but ``/healthz``, and the Origin check on state-changing requests."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from adapters.shared.problem import problem_response
from contracts.limits import EndpointLimits

OPEN_PATHS = frozenset({"/healthz"})


class TokenAuth:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if self._presented_ok(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
            return
        response = problem_response(
            401,
            "missing or wrong bearer token (send 'Authorization: Bearer <token>')",
            headers={"www-authenticate": "Bearer"},
        )
        await response(scope, receive, send)

    def _presented_ok(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return hmac.compare_digest(value[7:].strip(), self.token)
        if scope["type"] == "websocket":
            # Browsers cannot set headers on a WebSocket upgrade.
            query = parse_qs(scope.get("query_string", b"").decode())
            for candidate in query.get("token", []):
                return hmac.compare_digest(candidate.encode(), self.token)
        return False


class OriginGuard:
    """Refuses state-changing requests that a web page on another site sent.

    A page anywhere can make a browser POST to 127.0.0.1 (a form, a no-cors fetch) without a
    CORS preflight; browsers mark such requests with ``Origin``. Requests without one (curl,
    SDKs, other servers) pass, as do origins on the allow-list (default: this machine's).
    """

    SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app: ASGIApp, limits: EndpointLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in self.SAFE:
            origin = next(
                (v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None
            )
            if not self.limits.origin_allowed(origin):
                response = problem_response(
                    403,
                    f"cross-origin request from {origin} refused; allow the origin with "
                    "--allowed-origin",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
