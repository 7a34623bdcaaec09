"""``GET /`` (the console page) and ``/console/…`` (its scripts, styles and the vendored
@ag-ui/client bundle), served from the package.

The files hold no secret and read nothing on the server, so they are served without the bearer
token (the page asks for it and sends it with its own requests), and the console is the same
wherever the package is installed."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC = Path(__file__).parent / "static"
PREFIX = "/console"
# Every file: what it is declared to be and nothing else (a script is never sniffed as HTML).
FILE_HEADERS = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}
# The page runs only its own files, talks only to the gateway that served it (fetch,
# EventSource, the AG-UI WebSocket: 'self' takes ws: of the same host), and is framed by no
# other page (clickjacking: it has buttons that cancel runs and approve tool calls).
# X-Frame-Options says the same to browsers older than frame-ancestors.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {
    **FILE_HEADERS,
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    # A page that must be fetched again after an upgrade; its scripts are revalidated by ETag.
    "cache-control": "no-cache",
}


def is_console_path(path: str) -> bool:
    return path == "/" or path.startswith(PREFIX + "/")


def routes() -> list[BaseRoute]:
    index = STATIC / "index.html"

    async def page(request: Request) -> Response:
        return FileResponse(index, headers=PAGE_HEADERS)

    return [
        Route("/", page, methods=["GET", "HEAD"]),
        Mount(PREFIX, with_headers(StaticFiles(directory=STATIC), FILE_HEADERS), name="console"),
    ]


def with_headers(app: ASGIApp, headers: dict[str, str]) -> ASGIApp:
    """``app`` with ``headers`` on each of its responses."""
    raw = [(name.encode(), value.encode()) for name, value in headers.items()]

    async def headed(scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *raw]}
            await send(message)

        await app(scope, receive, sending)

    return headed
