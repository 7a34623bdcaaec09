"""Which web pages may call the HTTP API from a browser (CORS).

The same origins the Origin guard and the WebSockets trust (``EndpointLimits.origin_allowed``):
pages served from this machine — ``localhost``, ``127.0.0.1``, ``[::1]``, any port, http or
https — unless ``--allowed-origin`` names the origins instead. Starlette's CORSMiddleware does
the protocol; this module only configures it and keeps it away from other origins.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from ..adapters.shared.problem import problem_response
from ..contracts.limits import LOOPBACK_ORIGIN

# DELETE: forgetting a thread. Everything else a page does is GET or POST.
METHODS = ("GET", "POST", "DELETE")
# What our clients send beyond the safelisted ones: the token, an EventSource's cursor, the
# AG-UI client's ``Accept: text/event-stream`` and JSON body, a traced page's W3C context, and
# what MCP's streamable HTTP transport sends after ``initialize`` (its session and version).
REQUEST_HEADERS = (
    "accept",
    "authorization",
    "content-type",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "traceparent",
    "tracestate",
)
# A created run's or thread's address; when to retry a 429 or 503; the MCP session an
# ``initialize`` opened, which a browser's MCP client must read to cancel a call later.
EXPOSED_HEADERS = ("location", "mcp-session-id", "retry-after")


class BrowserAccess:
    """CORS for the allowed origins; every other request passes by untouched.

    Starlette's middleware also writes ``Access-Control-*`` headers for origins it refuses
    (and answers their preflights 400 with its method and header lists): a page that is not
    allowed gets none of that here, and its preflight a 403 problem that says why.
    The token is not asked of a preflight (browsers send none); the request after it needs it.
    """

    def __init__(self, app: ASGIApp, allowed_origins: Sequence[str]) -> None:
        self.app = app
        listed = [o for o in allowed_origins if o]
        self.cors = CORSMiddleware(
            app,
            allow_origins=listed,
            allow_origin_regex=None if listed else LOOPBACK_ORIGIN,
            allow_methods=METHODS,
            allow_headers=REQUEST_HEADERS,
            # Never cookies: the token is a header, and "*" must not come with credentials.
            allow_credentials=False,
            # Chrome's Private Network Access asks before a public page reaches a private
            # address: an origin the operator listed is consent enough.
            allow_private_network=True,
            expose_headers=EXPOSED_HEADERS,
        )

    def allows(self, origin: str) -> bool:
        return self.cors.is_allowed_origin(origin)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            # WebSockets check Origin themselves (EndpointLimits.origin_allowed).
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
        elif self.allows(origin):
            await self.cors(scope, receive, send)
        elif scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            detail = (
                f"cross-origin requests from {origin[:200]} are not allowed; allow the origin "
                "with --allowed-origin"
            )
            await problem_response(403, detail)(scope, receive, send)
        else:
            # A GET is answered without CORS headers (the browser hides it from the page);
            # a POST meets the Origin guard's 403.
            await self.app(scope, receive, send)
