"""The SQLite journal's blob store (gateway.journal.blobs): two tables, the bytes by
reference and which run refers to which. Written under the journal's writer lock, in a
transaction of its own, when a run starts; a run's references and the blobs nobody refers to
any more go in the transaction that deletes the run (:func:`drop_refs`).

The bytes stored are a counter (``blob_usage``, one row) moved in the transactions that add
and delete blobs: summing ``size`` at each start read every blob (its bytes come before its
size in the row), a gigabyte at the default bound. A database from before the counter gets
it from that sum, once."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Collection, Mapping

import anyio

from .blobs import DurableRelease, check_room

ID_PAGE = 500

SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    ref TEXT PRIMARY KEY,
    data BLOB NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS blob_refs (
    run_id TEXT NOT NULL,
    ref TEXT NOT NULL,
    PRIMARY KEY (run_id, ref)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_refs_ref ON blob_refs (ref);
CREATE TABLE IF NOT EXISTS blob_usage (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO blob_usage
    SELECT 1, COALESCE(SUM(size), 0) FROM blobs WHERE NOT EXISTS (SELECT 1 FROM blob_usage);
"""


def drop_refs(conn: sqlite3.Connection, run_ids: list[str]) -> None:
    """Inside the caller's transaction: the runs' references, and each blob they referred
    to that no other run does."""
    refs: set[str] = set()
    # A page of ids at a time: a prune may drop more runs than a statement takes variables.
    for at in range(0, len(run_ids), ID_PAGE):
        page = run_ids[at : at + ID_PAGE]
        marks = ",".join("?" * len(page))
        found = conn.execute(f"SELECT ref FROM blob_refs WHERE run_id IN ({marks})", page)
        refs.update(row[0] for row in found)
        if refs:
            conn.execute(f"DELETE FROM blob_refs WHERE run_id IN ({marks})", page)
    freed = 0
    for ref in refs:
        gone = conn.execute(
            "DELETE FROM blobs WHERE ref = ? AND NOT EXISTS "
            "(SELECT 1 FROM blob_refs r WHERE r.ref = blobs.ref) RETURNING size",
            (ref,),
        ).fetchone()
        freed += gone[0] if gone else 0
    if freed:
        conn.execute("UPDATE blob_usage SET bytes = bytes - ?", (freed,))


class SqliteBlobs(DurableRelease):
    def __init__(
        self,
        writing: Callable[[], sqlite3.Connection],
        reading: Callable[[], sqlite3.Connection],
        lock: threading.Lock,
        read_lock: threading.Lock,
    ) -> None:
        self._writing = writing
        self._reading = reading
        self._lock = lock
        self._read_lock = read_lock

    async def keep(self, run_id: str, blobs: Mapping[str, bytes], limit: int) -> None:
        await anyio.to_thread.run_sync(self._keep_sync, run_id, blobs, limit)

    def _keep_sync(self, run_id: str, blobs: Mapping[str, bytes], limit: int) -> None:
        refs = list(blobs)
        marks = ",".join("?" * len(refs))
        with self._lock:
            conn = self._writing()
            conn.execute("BEGIN IMMEDIATE")
            try:
                there = {
                    r[0]
                    for r in conn.execute(f"SELECT ref FROM blobs WHERE ref IN ({marks})", refs)
                }
                new = [(ref, raw, len(raw)) for ref, raw in blobs.items() if ref not in there]
                stored = conn.execute("SELECT bytes FROM blob_usage").fetchone()[0]
                adding = sum(row[2] for row in new)
                check_room(stored, adding, limit)
                conn.executemany("INSERT INTO blobs (ref, data, size) VALUES (?,?,?)", new)
                conn.execute("UPDATE blob_usage SET bytes = bytes + ?", (adding,))
                conn.executemany(
                    "INSERT OR IGNORE INTO blob_refs (run_id, ref) VALUES (?,?)",
                    [(run_id, ref) for ref in refs],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def forget(self, run_id: str) -> None:
        await anyio.to_thread.run_sync(self._forget_sync, run_id)

    def _forget_sync(self, run_id: str) -> None:
        with self._lock:
            conn = self._writing()
            conn.execute("BEGIN")
            try:
                drop_refs(conn, [run_id])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def referrers(self, cursor: str, limit: int) -> tuple[list[str], str]:
        def run() -> list[str]:
            # The primary key's order: a page is a range of it, however many runs there are.
            sql = "SELECT DISTINCT run_id FROM blob_refs WHERE run_id > ? ORDER BY run_id LIMIT ?"
            with self._read_lock:
                return [row[0] for row in self._reading().execute(sql, (cursor, limit))]

        page = await anyio.to_thread.run_sync(run)
        return page, page[-1] if len(page) == limit else ""

    async def load(self, refs: Collection[str]) -> dict[str, bytes]:
        return await anyio.to_thread.run_sync(self._load_sync, list(refs))

    def _load_sync(self, refs: list[str]) -> dict[str, bytes]:
        marks = ",".join("?" * len(refs))
        with self._read_lock:
            rows = self._reading().execute(
                f"SELECT ref, data FROM blobs WHERE ref IN ({marks})", refs
            )
            return {ref: bytes(data) for ref, data in rows}

    async def usage(self) -> tuple[int, int]:
        def run() -> tuple[int, int]:
            with self._read_lock:
                sql = "SELECT (SELECT COUNT(*) FROM blobs), bytes FROM blob_usage"
                count, size = self._reading().execute(sql).fetchone()
                return int(count), int(size)

        return await anyio.to_thread.run_sync(run)
