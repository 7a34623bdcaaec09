"""Request guards as pure ASGI middleware (streams pass through untouched): the Host check
against DNS rebinding, the bearer token on every endpoint but ``/healthz`` and the console's
static files (also as ``?token=`` where a browser cannot send a header: WebSockets, EventSource),
and the Origin check on state-changing requests."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from ..adapters.a2a.card import CARD_PATH as AGENT_CARD_PATH
from ..adapters.shared.problem import problem_body
from ..contracts.agents import AGENT_NAME
from ..contracts.limits import EndpointLimits
from ..contracts.refusals import Refusal
from . import health
from .apidocs.routes import SPEC_PATH, is_docs_path
from .console.routes import is_console_path
from .refusals import PROBLEMS, Refusals

# The API's description is open as /healthz is: it holds no run, thread or setting (docs/api.md).
OPEN_PATHS = frozenset({health.PATH, health.READY_PATH, SPEC_PATH})
LOOPBACK_NAMES = frozenset({"localhost"})


class HostGuard:
    """Answers 421 to requests whose ``Host`` is not this machine or an allowed name.

    DNS rebinding: a page on attacker.example re-resolves its own name to 127.0.0.1, and the
    browser then lets it read the gateway's answers as same-origin — but the request still says
    ``Host: attacker.example``. Loopback names and addresses (any port) are always allowed,
    plus ``allowed`` (``name`` for any port, ``name:port`` for one). Requests without a Host
    (HTTP/1.0 tools) pass: browsers always send one. WebSocket upgrades get the same 421 when
    the server can send a denial response, a refused upgrade (403) otherwise.
    """

    def __init__(
        self, app: ASGIApp, allowed: Iterable[str] = (), refusals: Refusals = PROBLEMS
    ) -> None:
        self.app = app
        self.allowed = frozenset(a.strip().lower().rstrip(".") for a in allowed if a.strip())
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if host is None or self.host_allowed(host):
            await self.app(scope, receive, send)
            return
        detail = (
            f"requests for host {host[:100]!r} are not served here; a name that points at this "
            "server can be allowed with --allowed-host"
        )
        if scope["type"] == "http":
            refusal = Refusal(status=421, detail=detail, reason="host_refused")
            await self.refusals.response(scope, refusal)(scope, receive, send)
        elif "websocket.http.response" in scope.get("extensions", {}):
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": 421,
                    "headers": [(b"content-type", b"application/problem+json")],
                }
            )
            await send({"type": "websocket.http.response.body", "body": problem_body(421, detail)})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": "host not allowed"})

    def host_allowed(self, host: str) -> bool:
        host = host.strip().lower()
        name = _hostname(host)
        if name is None:
            return False
        if name in LOOPBACK_NAMES or name in self.allowed or host.rstrip(".") in self.allowed:
            return True
        if "*" in self.allowed:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False


def _hostname(host: str) -> str | None:
    """The name of a Host header value without its port; None if it is malformed."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or (host[end + 1 :] and not host[end + 1 :].startswith(":")):
            return None
        return host[1:end]
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".")


def is_open_path(method: str, path: str) -> bool:
    """``/healthz``, the API's description, the static files of the console and of the
    description's page (the console asks for the token itself), and A2A's Agent Cards (how
    an agent is discovered, before any credential: the card says which one to send)."""
    return path in OPEN_PATHS or (
        method in ("GET", "HEAD")
        and (is_console_path(path) or is_docs_path(path) or is_agent_card_path(path))
    )


def is_agent_card_path(path: str) -> bool:
    """``/.well-known/agent-card.json``, or ``/agents/NAME/`` then that."""
    if path == AGENT_CARD_PATH:
        return True
    head, _, name = path.removesuffix(AGENT_CARD_PATH).rpartition("/")
    return (
        path.endswith(AGENT_CARD_PATH)
        and head == "/agents"
        and AGENT_NAME.fullmatch(name) is not None
    )


class OriginGuard:
    """Refuses state-changing requests that a web page on another site sent.

    A page anywhere can make a browser POST to 127.0.0.1 (a form, a no-cors fetch) without a
    CORS preflight; browsers mark such requests with ``Origin``. Requests without one (curl,
    SDKs, other servers) pass, as do origins on the allow-list (default: this machine's).
    """

    SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app: ASGIApp, limits: EndpointLimits, refusals: Refusals = PROBLEMS) -> None:
        self.app = app
        self.limits = limits
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in self.SAFE:
            origin = next(
                (v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None
            )
            if not self.limits.origin_allowed(origin):
                detail = (
                    f"cross-origin request from {str(origin)[:200]} refused; allow the origin with "
                    "--allowed-origin"
                )
                refusal = Refusal(status=403, detail=detail, reason="origin_refused")
                await self.refusals.response(scope, refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
