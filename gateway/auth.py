"""Bearer-token check for every endpoint but ``/healthz`` (pure ASGI, so streams are untouched)."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from adapters.shared.problem import problem_response

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
