"""One gateway instance's link to the PostgreSQL of a journal: what its URL sets, its pool of
connections, the schema it creates and migrates at start, and what PostgreSQL out of reach
means to a request (gateway.journal.postgres holds the journal itself).

Every wait is bounded: a connection from the pool (``pool_timeout``), each statement on the
server (``statement_timeout``), and each operation on this side as well (a server that is
stopped, not down, enforces no timeout of its own): past ``statement_timeout`` plus a second
the operation is abandoned and its connection closed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, LiteralString, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import psycopg
from psycopg import sql
from psycopg.types.string import StrBinaryDumper, StrDumperUnknown
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...contracts.ports import Unavailable

log = logging.getLogger("loopgate.journal")

Method = TypeVar("Method", bound=Callable[..., Coroutine[Any, Any, Any]])

UNAVAILABLE = "the journal (PostgreSQL) does not answer; retry shortly"
# What a failure of PostgreSQL is, for a request's answer and readiness (never its message:
# it may quote a host, a user or a statement).
FAILURES: tuple[type[Exception], ...] = (psycopg.Error, PoolTimeout, OSError, TimeoutError)
# Beyond the server's own statement timeout: what this side waits before it gives up.
CLIENT_SLACK_S = 1.0

# Our parameters in the URL (the rest go to libpq as they are).
DEFAULTS = {
    "schema": "public",
    "pool_min": "1",
    "pool_max": "10",
    "pool_timeout": "5",
    "statement_timeout": "10",
    "connect_timeout": "5",
}

# The schema, by version: each step runs once, in order, in one transaction with the others
# that are due, under an advisory lock (instances starting together migrate once).
MIGRATIONS: list[LiteralString] = [
    # 1: runs, their events and threads.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        record BYTEA NOT NULL,
        state TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        finished_at BIGINT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        instance TEXT,
        owner_subject TEXT,
        owner_tenant TEXT
    );
    CREATE INDEX runs_created ON runs (created_at);
    CREATE INDEX runs_thread ON runs (thread_id, created_at);
    CREATE INDEX runs_owner ON runs (owner_subject, owner_tenant, created_at);
    CREATE INDEX runs_running ON runs (instance) WHERE state = 'running';
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        ts BIGINT NOT NULL,
        kind TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE threads (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        record BYTEA NOT NULL,
        owner_subject TEXT,
        owner_tenant TEXT
    );
    CREATE INDEX threads_created ON threads (created_at);
    CREATE INDEX threads_owner ON threads (owner_subject, owner_tenant, created_at);
    """,
    # 2: attachments' bytes, once each, and which run refers to which
    # (gateway.journal.postgres_blobs).
    """
    CREATE TABLE blobs (
        ref TEXT PRIMARY KEY,
        data BYTEA NOT NULL,
        size BIGINT NOT NULL
    );
    CREATE TABLE blob_refs (
        run_id TEXT NOT NULL,
        ref TEXT NOT NULL,
        PRIMARY KEY (run_id, ref)
    );
    CREATE INDEX blob_refs_ref ON blob_refs (ref);
    """,
    # 3: the start request a queued run waits with (gateway.journal.postgres_queue), until a
    # worker begins it or it ends; the queued runs, oldest first, for a Redis that lost them.
    """
    ALTER TABLE runs ADD COLUMN request BYTEA;
    CREATE INDEX runs_queued ON runs (created_at) WHERE state = 'queued';
    """,
    # 4: the bytes the blobs take, kept as they are added and deleted (a sum read them all).
    """
    CREATE TABLE blob_usage (id INT PRIMARY KEY CHECK (id = 1), bytes BIGINT NOT NULL);
    INSERT INTO blob_usage SELECT 1, COALESCE(SUM(size), 0) FROM blobs;
    """,
]
# One number for every loopgate journal's advisory lock (the schema is in the lock's scope:
# pg_advisory_xact_lock(key, hashtext(schema))).
MIGRATION_LOCK = 0x100764


class NulSafeText(StrDumperUnknown):
    """Text as psycopg sends it, with NUL (which PostgreSQL's text refuses, and the gateway
    lets through in ids and kinds) sent as U+FFFD: a commit PostgreSQL refused for it would be
    retried forever, holding every later one. Reads send their ids so too, and find them."""

    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


class NulSafeBinaryText(StrBinaryDumper):
    """The same, for parameters sent in binary (a commit's columns)."""

    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.adapters.register_dumper(str, NulSafeText)
    conn.adapters.register_dumper(str, NulSafeBinaryText)


class PostgresLink:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query))
        ours = {name: params.pop(name, default) for name, default in DEFAULTS.items()}
        self.schema = ours["schema"]
        if not self.schema.replace("_", "").isalnum():
            raise ValueError(
                f"the PostgreSQL URL's schema must be a plain name, got {self.schema!r}"
            )
        self.pool_min: int = _number(ours, "pool_min", int)
        self.pool_max: int = max(_number(ours, "pool_max", int), self.pool_min, 1)
        self.pool_timeout: float = _number(ours, "pool_timeout", float)
        self.statement_timeout: float = _number(ours, "statement_timeout", float)
        self.connect_timeout: float = _number(ours, "connect_timeout", float)
        for name in ("pool_timeout", "statement_timeout", "connect_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"the PostgreSQL URL's {name} must be positive")
        params["connect_timeout"] = str(max(int(self.connect_timeout), 1))
        self.conninfo = urlunsplit(parts._replace(query=urlencode(params)))
        # Where it is, for messages: never the user or the password.
        self.where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
        self._pool: AsyncConnectionPool[Any] | None = None

    def ping(self) -> None:
        """A ValueError saying why, if the PostgreSQL of this URL does not answer: for a
        command to say at start-up, rather than fail as its server starts."""
        try:
            with psycopg.connect(self.conninfo, options=self._options()) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            raise ValueError(
                f"--journal: cannot reach PostgreSQL at {self.where} (or it refused the "
                "connection: check the URL's user, password and database)"
            ) from None

    @property
    def op_timeout(self) -> float:
        return self.statement_timeout + CLIENT_SLACK_S

    def _options(self) -> str:
        ms = int(self.statement_timeout * 1000)
        return f"-c statement_timeout={ms} -c search_path={self.schema}"

    async def open(self) -> None:
        """Connect and bring the schema to this version; a ValueError that says what failed."""
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.conninfo,
            min_size=self.pool_min,
            max_size=self.pool_max,
            timeout=self.pool_timeout,
            kwargs={"autocommit": True, "options": self._options()},
            configure=_configure,
            open=False,
            name="loopgate-journal",
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout + self.pool_timeout)
            self._pool = pool
            await self._migrate()
        except FAILURES:
            self._pool = None
            await pool.close()
            raise ValueError(
                f"--journal postgresql://: PostgreSQL at {self.where} does not answer "
                "or refuses the journal's schema"
            ) from None
        except BaseException:
            self._pool = None
            await pool.close()
            raise

    async def _migrate(self) -> None:
        async with self.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (MIGRATION_LOCK, self.schema)
            )
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS loopgate_schema (version INTEGER NOT NULL)"
            )
            cur = await conn.execute("SELECT max(version) FROM loopgate_schema")
            row = await cur.fetchone()
            version = int(row[0]) if row and row[0] is not None else 0
            if version > len(MIGRATIONS):
                raise ValueError(
                    f"the journal's schema in PostgreSQL is version {version}, newer than this "
                    f"loopgate knows ({len(MIGRATIONS)}): upgrade loopgate"
                )
            for step in range(version, len(MIGRATIONS)):
                await conn.execute(MIGRATIONS[step])
                await conn.execute("INSERT INTO loopgate_schema (version) VALUES (%s)", (step + 1,))
                log.info("journal: PostgreSQL schema %s now at version %d", self.schema, step + 1)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection for one operation, the whole of which is bounded (a
        TimeoutError past it: the connection is closed, not given back)."""
        pool = self.pool()
        with anyio.fail_after(self.pool_timeout + self.op_timeout):
            conn = await pool.getconn()
            try:
                yield conn
            except BaseException:
                # Its state is unknown (a statement cut off, a server gone): never reused.
                await conn.close()
                raise
            finally:
                await pool.putconn(conn)

    def pool(self) -> AsyncConnectionPool[Any]:
        if self._pool is None:
            raise RuntimeError("the journal is closed")
        return self._pool

    @property
    def closed(self) -> bool:
        return self._pool is None

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            with anyio.move_on_after(self.connect_timeout):
                await pool.close()


def reaching(method: Method) -> Method:
    """A read of a request: PostgreSQL out of reach (or past its timeouts) is the port's
    Unavailable (503 with Retry-After over HTTP), not an internal error."""

    @functools.wraps(method)
    async def reaching(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except FAILURES:
            log.warning("journal: PostgreSQL did not answer a request's %s", method.__name__)
            raise Unavailable(UNAVAILABLE, retry_after=1) from None

    return cast(Method, reaching)


def trouble(exc: BaseException) -> str:
    """What a failed commit says of PostgreSQL, in words for readiness."""
    if isinstance(exc, (TimeoutError, PoolTimeout)):
        return "PostgreSQL does not answer in time"
    if isinstance(exc, psycopg.errors.DiskFull):
        return "PostgreSQL is out of disk space"
    if isinstance(exc, psycopg.OperationalError):
        return "PostgreSQL does not answer"
    return "PostgreSQL refuses the journal's commits"


def _number(params: dict[str, str], name: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(params[name])
    except ValueError:
        raise ValueError(
            f"the PostgreSQL URL's {name} must be a number, got {params[name]!r}"
        ) from None
