"""A real PostgreSQL for tests/postgres (tests/fakes/postgres_server.py), one per session (each
xdist worker starts its own). Each test gets a schema of its own (the journal URL's
``schema=`` parameter), so tests running side by side on one server never meet.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.fakes.postgres_server import postgres_server as start_postgres_server
from tests.fakes.redis_server import RedisProcess
from tests.redis.conftest import redis_server, redis_url  # noqa: F401  (fixtures)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    with start_postgres_server() as url:
        yield url


def with_schema(url: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}schema=t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """The server's URL with a schema of this test's own, dropped after it (a server named by
    LOOPGATE_TEST_POSTGRES_URL keeps nothing of the tests)."""
    url = with_schema(postgres_server)
    yield url
    base, schema = url.rsplit("?schema=", 1) if "?schema=" in url else url.rsplit("&schema=", 1)
    with contextlib.suppress(psycopg.Error), psycopg.connect(base, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def volatile_redis() -> Iterator[RedisProcess]:
    """A redis-server that persists nothing: killed, it comes back empty (every lease, claim,
    subscription and queue entry gone)."""
    with RedisProcess("--save", "", "--appendonly", "no") as server:
        yield server
