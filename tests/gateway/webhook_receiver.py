"""A real webhook receiver for the tests: a Starlette app on uvicorn (127.0.0.1) that keeps
every POST by path, and answers ``/hook/flaky-…`` with 503 twice before 200."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.servers import serve_app
from tests.waiting import wait_until


class Receiver:
    """Every POST by its path's key; what each try was answered."""

    def __init__(self) -> None:
        self.posts: dict[str, list[dict[str, Any]]] = {}
        self.answered: dict[str, list[int]] = {}
        self.lock = threading.Lock()

    async def hook(self, request: Request) -> Response:
        key = request.path_params["key"]
        body = json.loads(await request.body())
        with self.lock:
            tries = self.answered.setdefault(key, [])
            status = 503 if key.startswith("flaky") and len(tries) < 2 else 200
            tries.append(status)
            if status == 200:
                self.posts.setdefault(key, []).append(body)
        return Response(status_code=status)

    def of(self, key: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.posts.get(key, []))

    def tries(self, key: str) -> list[int]:
        with self.lock:
            return list(self.answered.get(key, []))

    def delivered(self, key: str) -> dict[str, Any]:
        """The one POST ``key`` got (waiting for it); more than one fails."""
        posts = wait_until(lambda: self.of(key), 20, f"the webhook {key}")
        assert len(posts) == 1, posts
        return posts[0]


@contextmanager
def receiving() -> Iterator[tuple[str, Receiver]]:
    """A receiver on a port of its own: its base URL (hooks are ``{base}/hook/{key}``)."""
    receiver = Receiver()
    app = Starlette(routes=[Route("/hook/{key}", receiver.hook, methods=["POST"])])
    with serve_app(app) as base:
        yield base, receiver
