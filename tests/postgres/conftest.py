"""A real PostgreSQL for tests/postgres (tests/fakes/postgres_server.py), one per session (each
xdist worker starts its own). Each test gets a schema of its own (the journal URL's
``schema=`` parameter), so tests running side by side on one server never meet.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fakes.postgres_server import postgres_server as start_postgres_server
from tests.redis.conftest import redis_server, redis_url  # noqa: F401  (fixtures)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    with start_postgres_server() as url:
        yield url


def with_schema(url: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}schema=t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """The server's URL with a schema of this test's own."""
    return with_schema(postgres_server)
