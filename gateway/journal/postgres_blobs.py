"""The PostgreSQL journal's blob store (gateway.journal.blobs): the tables of schema version 2,
the bytes by reference and which run refers to which.

A run's blobs are kept in a transaction of their own when it starts; a run's references, and
the blobs nobody refers to any more, go in the transaction that deletes the run
(:func:`drop_refs`). Both hold one advisory lock (per schema): a blob found stored by a start
is never dropped before that start's reference to it is committed, and two instances
starting runs at once count the store's bytes one after the other. The bytes are a counter
(``blob_usage``, one row, schema version 3) moved in those same transactions: summing
``size`` at each start read every blob's row.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import psycopg

from .blobs import DurableRelease, check_room
from .postgres_link import MIGRATION_LOCK, PostgresLink, reaching

# The store's lock: the migrations' key, one up (its scope is the schema as theirs is).
BLOBS_LOCK = MIGRATION_LOCK + 1
_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"


async def drop_refs(conn: psycopg.AsyncConnection[Any], schema: str, run_ids: list[str]) -> None:
    """Inside the caller's transaction: the runs' references, and each blob they referred
    to that no other run does."""
    await conn.execute(_LOCK, (BLOBS_LOCK, schema))
    cur = await conn.execute(
        "DELETE FROM blob_refs WHERE run_id = ANY(%s) RETURNING ref", (run_ids,)
    )
    refs = list({row[0] for row in await cur.fetchall()})
    if refs:
        cur = await conn.execute(
            "DELETE FROM blobs b WHERE b.ref = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM blob_refs r WHERE r.ref = b.ref) RETURNING size",
            (refs,),
        )
        freed = sum(int(row[0]) for row in await cur.fetchall())
        if freed:
            await conn.execute("UPDATE blob_usage SET bytes = bytes - %s", (freed,))


class PostgresBlobs(DurableRelease):
    def __init__(self, link: PostgresLink) -> None:
        self.link = link

    @reaching
    async def keep(self, run_id: str, blobs: Mapping[str, bytes], limit: int) -> None:
        refs = list(blobs)
        async with self.link.connection() as conn, conn.transaction():
            await conn.execute(_LOCK, (BLOBS_LOCK, self.link.schema))
            cur = await conn.execute("SELECT ref FROM blobs WHERE ref = ANY(%s)", (refs,))
            there = {row[0] for row in await cur.fetchall()}
            new = [(ref, raw) for ref, raw in blobs.items() if ref not in there]
            cur = await conn.execute("SELECT bytes FROM blob_usage")
            row = await cur.fetchone()
            adding = sum(len(raw) for _, raw in new)
            check_room(int(row[0]) if row else 0, adding, limit)
            if new:
                await conn.execute("UPDATE blob_usage SET bytes = bytes + %s", (adding,))
                await conn.execute(
                    "INSERT INTO blobs (ref, data, size) SELECT * FROM "
                    "unnest(%s::text[], %s::bytea[], %s::bigint[])",
                    ([r for r, _ in new], [raw for _, raw in new], [len(raw) for _, raw in new]),
                )
            await conn.execute(
                "INSERT INTO blob_refs (run_id, ref) SELECT %s, unnest(%s::text[]) "
                "ON CONFLICT DO NOTHING",
                (run_id, refs),
            )

    @reaching
    async def forget(self, run_id: str) -> None:
        async with self.link.connection() as conn, conn.transaction():
            await drop_refs(conn, self.link.schema, [run_id])

    @reaching
    async def referrers(self, cursor: str, limit: int) -> tuple[list[str], str]:
        async with self.link.connection() as conn:
            cur = await conn.execute(
                "SELECT DISTINCT run_id FROM blob_refs WHERE run_id > %s ORDER BY run_id LIMIT %s",
                (cursor, limit),
            )
            page = [row[0] for row in await cur.fetchall()]
        return page, page[-1] if len(page) == limit else ""

    @reaching
    async def load(self, refs: Collection[str]) -> dict[str, bytes]:
        async with self.link.connection() as conn:
            cur = await conn.execute(
                "SELECT ref, data FROM blobs WHERE ref = ANY(%s)", (list(refs),)
            )
            return {ref: bytes(data) for ref, data in await cur.fetchall()}

    @reaching
    async def usage(self) -> tuple[int, int]:
        async with self.link.connection() as conn:
            cur = await conn.execute("SELECT (SELECT COUNT(*) FROM blobs), bytes FROM blob_usage")
            row = await cur.fetchone()
            return (int(row[0]), int(row[1])) if row else (0, 0)
