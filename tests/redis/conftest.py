"""A real Redis for tests/redis (tests/fakes/redis_server.py), one per session (each xdist
worker starts its own). Each test gets its own key prefix (the journal's ``prefix=``
parameter), so a shared server's other keys are never touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fakes.redis_server import redis_server as start_redis_server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """``redis://HOST:PORT/DB`` of a running server."""
    with start_redis_server() as url:
        yield url


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The server's URL with a key prefix of this test's own."""
    sep = "&" if "?" in redis_server else "?"
    return f"{redis_server}{sep}prefix=t{uuid.uuid4().hex[:12]}"
