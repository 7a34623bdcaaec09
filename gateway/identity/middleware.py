"""One principal per request, before any adapter sees it (docs/auth.md).

Each configured credential source is asked in turn (gateway/identity/presented.py); the first
principal wins and the request runs as it (contracts.principal.acting_as), so the run service
checks ownership without the adapters' help. With no source configured, a gateway on loopback
serves its machine's own user (LOCAL, an admin): the development default. With any configured,
every request needs credentials, loopback included. WebSocket upgrades and EventSource GETs may
carry the token as ``?token=`` (a browser can set no header on them); stdio commands act as the
local user without a request at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from ...contracts.principal import LOCAL, Principal, acting_as
from ...contracts.refusals import Refusal
from ..query_token import event_stream
from ..refusals import PROBLEMS, Refusals
from .presented import CredentialSource, Presented, Rejected

NO_CREDENTIALS = Refusal(
    status=401,
    detail="no bearer token: send an API key or the gateway's token as "
    "'Authorization: Bearer <token>'",
    reason="no_credentials",
    headers={"www-authenticate": "Bearer"},
)
WRONG_CREDENTIALS = Refusal(
    status=401,
    detail="wrong bearer token: it is not an API key, token or signed identity this gateway takes",
    reason="wrong_credentials",
    # RFC 6750: a token was sent, and it is not one this server takes.
    headers={"www-authenticate": 'Bearer error="invalid_token"'},
)
# Who is told of each request's outcome (gateway/identity/audit.py): principal or refusal.
Observer = Callable[[Scope, Principal | None, Rejected | None], None]


class Authenticate:
    def __init__(
        self,
        app: ASGIApp,
        sources: Sequence[CredentialSource],
        *,
        is_open: Callable[[str, str], bool],
        refusals: Refusals = PROBLEMS,
        observe: Observer | None = None,
    ) -> None:
        self.app = app
        self.sources = tuple(sources)
        self.is_open = is_open
        self.refusals = refusals
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self.sources:
            # The development default: only ever installed on loopback (Settings checks it).
            with acting_as(LOCAL):
                await self.app(scope, receive, send)
            return
        if self.is_open(scope.get("method", ""), scope["path"]):
            await self.app(scope, receive, send)
            return
        presented = presented_by(scope)
        try:
            principal = await self.resolve(presented)
        except Rejected as rejected:
            self._tell(scope, None, rejected)
            await self.refuse(scope, receive, send, refusal_of(rejected))
            return
        if principal is None:
            self._tell(scope, None, None)
            refusal = NO_CREDENTIALS if presented.bearer is None else WRONG_CREDENTIALS
            await self.refuse(scope, receive, send, refusal)
            return
        self._tell(scope, principal, None)
        with acting_as(principal):
            await self.app(scope, receive, send)

    async def resolve(self, presented: Presented) -> Principal | None:
        for source in self.sources:
            principal = await source.resolve(presented)
            if principal is not None:
                return principal
        return None

    def _tell(self, scope: Scope, principal: Principal | None, rejected: Rejected | None) -> None:
        if self.observe is not None:
            self.observe(scope, principal, rejected)

    async def refuse(self, scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
            return
        await self.refusals.response(scope, refusal)(scope, receive, send)


def refusal_of(rejected: Rejected) -> Refusal:
    if rejected.status == 403:
        return Refusal(status=403, detail=rejected.detail, reason="refused")
    return Refusal(
        status=401,
        detail=rejected.detail,
        reason="wrong_credentials",
        headers={"www-authenticate": 'Bearer error="invalid_token"'},
    )


def presented_by(scope: Scope) -> Presented:
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    bearer: str | None = None
    authorization = headers.get("authorization")
    if authorization is not None and authorization[:7].lower() == "bearer ":
        bearer = authorization[7:].strip()
    elif scope["type"] == "websocket" or event_stream(scope.get("method", ""), scope["path"]):
        # Browsers cannot set headers on a WebSocket upgrade, nor on an EventSource.
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        tokens = query.get("token", [])
        bearer = tokens[0] if tokens else None
    client = scope.get("client")
    return Presented(bearer=bearer or None, headers=headers, client=client[0] if client else None)
