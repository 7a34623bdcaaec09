"""gateway/webhooks.py against a real local webhook server: what is retried and what is not,
the attempts bound, the jobs bound, and nothing sent once the outbox has stopped."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from loopgate.contracts.webhooks import Webhook
from loopgate.gateway.webhooks import WebhookOutbox
from tests.fakes.servers import serve_app

pytestmark = pytest.mark.anyio


class Answers:
    """Each path answers with the status it names (``/status/503``); every POST is counted."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, bytes, str | None]] = []
        self.lock = threading.Lock()

    async def answer(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.posts.append((request.url.path, body, request.headers.get("x-token")))
        return Response(status_code=int(request.path_params["status"]))

    def to(self, path: str) -> int:
        with self.lock:
            return sum(1 for p, _, _ in self.posts if p == path)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Answers]]:
    answers = Answers()
    app = Starlette(routes=[Route("/status/{status}", answers.answer, methods=["POST"])])
    with serve_app(app) as base:
        yield base, answers


def outbox(max_jobs: int = 10) -> WebhookOutbox:
    return WebhookOutbox(timeout_s=5, attempts=3, backoff_s=0.01, max_jobs=max_jobs)


async def test_a_2xx_is_delivered_with_its_headers(server: tuple[str, Answers]) -> None:
    base, answers = server
    async with outbox().running() as box:
        hook = Webhook(url=f"{base}/status/204", body=b'{"a":1}', headers={"x-token": "t"})
        assert await box.deliver(hook) is True
    assert ("/status/204", b'{"a":1}', "t") in answers.posts


@pytest.mark.parametrize(("status", "tries"), [(503, 3), (429, 3), (400, 1), (404, 1)])
async def test_what_is_retried(server: tuple[str, Answers], status: int, tries: int) -> None:
    base, answers = server
    before = answers.to(f"/status/{status}")
    async with outbox().running() as box:
        assert await box.deliver(Webhook(url=f"{base}/status/{status}", body=b"{}")) is False
    assert answers.to(f"/status/{status}") - before == tries


async def test_a_host_that_refuses_is_given_up_on() -> None:
    async with outbox().running() as box:
        # Port 9 (discard) is closed on the loopback: every attempt is refused at once.
        assert await box.deliver(Webhook(url="http://127.0.0.1:9/hook", body=b"{}")) is False


async def test_jobs_are_bounded_and_end_with_the_outbox() -> None:
    release, both = anyio.Event(), anyio.Event()
    ran: list[int] = []

    async def job() -> None:
        ran.append(1)
        if len(ran) == 2:
            both.set()
        await release.wait()

    box = outbox(max_jobs=2)
    async with box.running():
        assert box.start_soon(job) and box.start_soon(job)
        assert not box.start_soon(job)  # the third is refused, not queued
        with anyio.fail_after(5):
            await both.wait()
    # Leaving cancelled the jobs still waiting; nothing runs or is sent after.
    assert box.jobs == 0
    assert not box.start_soon(job)
    assert await box.deliver(Webhook(url="http://127.0.0.1:9/x", body=b"{}")) is False
