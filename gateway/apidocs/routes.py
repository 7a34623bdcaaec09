"""``GET /openapi.json`` and ``GET /docs`` (with ``/docs/…``, the page's script and style).

Both are served without the token: the document describes what every loopgate of this version
serves and holds no run, thread or setting of this one, except whether it wants a token (which
any 401 says too); tools that read a description (code generators, API clients) fetch it
without credentials. The page is a small script of ours, not a vendored viewer: it renders
this one document, needs no build and loads nothing from any other host."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import msgspec
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ...contracts.projector import Adapter
from ..console.routes import PAGE_HEADERS, with_headers
from .document import IsOpen, openapi_document

STATIC = Path(__file__).parent / "static"
SPEC_PATH = "/openapi.json"
DOCS_PATH = "/docs"
# Fetched again after an upgrade (or a restart with a token); revalidated by ETag where it can.
_NO_CACHE = {"cache-control": "no-cache"}


def is_docs_path(path: str) -> bool:
    return path == DOCS_PATH or path.startswith(DOCS_PATH + "/")


def routes(adapters: Mapping[str, Adapter], *, token: bool, is_open: IsOpen) -> list[BaseRoute]:
    document = msgspec.json.encode(openapi_document(adapters, token=token, is_open=is_open))

    async def spec(request: Request) -> Response:
        return Response(document, media_type="application/json", headers=_NO_CACHE)

    async def page(request: Request) -> Response:
        # The console's policy: the page runs only its own files and is framed by no one.
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    return [
        Route(SPEC_PATH, spec, methods=["GET", "HEAD"]),
        Route(DOCS_PATH, page, methods=["GET", "HEAD"]),
        Mount(
            DOCS_PATH,
            # The page again at /docs/ (html=True): the same policy; on a script or a style
            # it is inert.
            with_headers(StaticFiles(directory=STATIC, html=True), PAGE_HEADERS),
            name="apidocs",
        ),
    ]
