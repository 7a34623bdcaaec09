"""The fake OpenAI-compatible server the reference-loop tests share: one per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeOpenAI, str]]:
    """The fake server and its base URL (``…/v1``); a stalling scenario waits 5 s at most."""
    fake = FakeOpenAI(stall_s=5.0)
    with serve_app(fake.app) as url:
        yield fake, f"{url}/v1"


@pytest.fixture
def fake(server: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    """The fake server, its recorded requests cleared for this test."""
    server[0].clear()
    return server[0]


@pytest.fixture
def base_url(server: tuple[FakeOpenAI, str]) -> str:
    return server[1]
