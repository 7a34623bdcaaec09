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

STATIC = Path(__file__).parent / "static"
PREFIX = "/console"
# A page that must be fetched again after an upgrade; its scripts are revalidated by ETag.
_NO_STORE = {"cache-control": "no-cache"}


def is_console_path(path: str) -> bool:
    return path == "/" or path.startswith(PREFIX + "/")


def routes() -> list[BaseRoute]:
    index = STATIC / "index.html"

    async def page(request: Request) -> Response:
        return FileResponse(index, headers=_NO_STORE)

    return [
        Route("/", page, methods=["GET", "HEAD"]),
        Mount(PREFIX, StaticFiles(directory=STATIC), name="console"),
    ]
