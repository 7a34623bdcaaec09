"""Where runs are kept beyond the hub's memory."""

from .base import (
    EVENT_OVERHEAD_BYTES,
    POSTGRES_SCHEMES,
    REDIS_SCHEMES,
    Cluster,
    Journal,
    RunRecord,
)
from .memory import MemoryJournal
from .sqlite import SqliteJournal, Synchronous


def open_journal(
    spec: str,
    *,
    synchronous: Synchronous = "normal",
    max_events: int = 100_000,
    max_age_s: float = 24 * 3600.0,
    bus: str | None = None,
) -> Journal:
    """``memory``, ``sqlite:PATH``, ``redis://HOST:PORT/DB`` (``rediss://``,
    ``redis+sentinel://``) or ``postgresql://…`` (shared through the Redis ``bus`` if given);
    ``synchronous`` is SQLite's (``normal`` or ``full``); ``max_events`` and ``max_age_s``
    bound what Redis keeps of a run (the hub's own retention bounds the rest)."""
    if spec == "memory":
        return MemoryJournal()
    if spec.startswith(REDIS_SCHEMES):
        # Imported only when asked: Redis is an optional extra (loopgate-server[redis]).
        from .redis_streams import RedisJournal

        return RedisJournal(spec, max_events=max_events, max_age_s=max_age_s)
    if spec.startswith(POSTGRES_SCHEMES):
        # Imported only when asked: psycopg is an optional extra (loopgate-server[postgres]).
        from .postgres import PostgresJournal

        return PostgresJournal(spec, bus=bus, max_events=max_events, max_age_s=max_age_s)
    return SqliteJournal(spec.removeprefix("sqlite:"), synchronous=synchronous)


def check_journal(spec: str, bus: str | None = None) -> None:
    """A ValueError now for what would keep the journal from opening and that a command can
    tell before it starts: for Redis, a client not installed or a server that does not
    answer (the message names the host, never the password); for PostgreSQL, psycopg not
    installed, a URL it cannot take, or a server that does not answer (and the bus's
    Redis, as Redis)."""
    if spec.startswith(POSTGRES_SCHEMES):
        try:
            from .postgres_link import PostgresLink
        except ImportError:
            raise ValueError(
                "--journal postgresql://: psycopg is not installed "
                "(pip install 'loopgate-server[postgres]')"
            ) from None
        PostgresLink(spec).ping()
        if bus is not None:
            try:
                check_journal(bus)
            except ValueError as refused:
                raise ValueError(str(refused).replace("--journal", "--bus", 1)) from None
        return
    if not spec.startswith(REDIS_SCHEMES):
        return
    try:
        from .redis_connect import RedisTarget
    except ImportError:
        raise ValueError(
            "--journal redis://: the Redis client is not installed "
            "(pip install 'loopgate-server[redis]')"
        ) from None
    RedisTarget.parse(spec).ping()


__all__ = [
    "EVENT_OVERHEAD_BYTES",
    "Cluster",
    "Journal",
    "MemoryJournal",
    "RunRecord",
    "SqliteJournal",
    "check_journal",
    "open_journal",
]
