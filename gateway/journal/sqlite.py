"""SQLite journal: embedded, durable, group commit (gateway.journal.group_commit: one
transaction for every push that arrived during the previous one).

What a commit promises: WAL with ``synchronous=NORMAL`` (the default) survives the process
dying (``kill -9``, a crash, the OOM killer): the commit is in the operating system's hands.
It may not survive power loss or a kernel crash, which can take back the last transactions
(never corrupt the file). ``synchronous=FULL`` syncs the WAL on every commit, which survives
those too at the cost of an fsync per group commit.

A small commit (at most ``INLINE_MAX_ROWS`` rows and ``INLINE_MAX_BYTES``) with
``synchronous=NORMAL`` runs on the event loop itself: it is a few inserts and one ``write()``
into the page cache (13 µs of CPU for one row, 34 for ten), less than handing it to a worker
thread costs (≈ 50 µs of CPU, and two wake-ups). Whatever may wait on the disk runs in worker
threads: bigger commits, every commit with ``synchronous=FULL`` (an fsync each), and
checkpoints. Automatic checkpoints are off; a task checkpoints between two commits once enough
has been written (commits wait for it, the event loop does not), so the next commit starts the
log from its beginning again.

Two connections, each under its own lock: the writer's and the readers' (WAL lets a reader see
the last commit while the writer adds the next).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

from ...contracts.envelope import Envelope
from ...contracts.ports import ThreadInfo
from ...contracts.principal import Owner
from .base import EVENT_OVERHEAD_BYTES, RunRecord
from .group_commit import Batch, GroupCommit
from .sqlite_blobs import SCHEMA as BLOBS_SCHEMA
from .sqlite_blobs import SqliteBlobs, drop_refs

log = logging.getLogger("loopgate.journal")

Synchronous = Literal["normal", "full"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    record BLOB NOT NULL,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at);
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, created_at);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    record BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_created ON threads (created_at);
"""

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(RunRecord).decode
# The owner is kept in the record's JSON (records stay one column, and older databases read).
_OWNED = (
    "json_extract(CAST(record AS TEXT), '$.owner.subject') = ? "
    "AND json_extract(CAST(record AS TEXT), '$.owner.tenant') = ?"
)
_decode_thread = msgspec.json.Decoder(ThreadInfo).decode
_decode_data = msgspec.json.Decoder(dict[str, Any]).decode

# (run_id, seq, ts, kind, encoded data): a row as executemany takes it.
Row = tuple[str, int, int, str, bytes]

INLINE_MAX_ROWS = 256
INLINE_MAX_BYTES = 64 << 10
# WAL bytes between checkpoints: about SQLite's own default (1,000 pages of 4 KiB).
CHECKPOINT_BYTES = 4 << 20


class SqliteJournal(GroupCommit[list[Row]]):
    cluster: None = None

    def __init__(self, path: str, *, synchronous: Synchronous = "normal") -> None:
        super().__init__(list)
        self.path = path
        self.synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._unchecked = 0  # bytes committed since the last checkpoint
        self._checkpoint_due = anyio.Event()
        self.blobs = SqliteBlobs(self._connection, self._reading, self._lock, self._read_lock)

    async def open(self) -> list[RunRecord]:
        await anyio.to_thread.run_sync(self._open_sync)
        rows = await self._query("SELECT record FROM runs WHERE state = 'running'", ())
        return [_decode_record(r[0]) for r in rows]

    def _open_sync(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
        # A checkpoint fsyncs: never inside a commit, which may run on the event loop.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        # Every table and index "if not exists": a journal file from an older version gets
        # the ones it lacks (threads), and keeps its runs.
        conn.executescript(_SCHEMA + BLOBS_SCHEMA)
        self._conn = conn
        self._reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)

    # --- writing --------------------------------------------------------------------------

    def record_event(self, envelope: Envelope, data: bytes) -> None:
        self._rows.append((envelope.run_id, envelope.seq, envelope.ts, envelope.kind, data))
        self._work.set()

    async def writer(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._checkpoints)
            await self._commit_forever()

    async def _checkpoints(self) -> None:
        while True:
            await self._checkpoint_due.wait()
            self._checkpoint_due = anyio.Event()
            # Between two commits: a log that was copied whole is then started over, which
            # it cannot be if the writer keeps adding to it while the copy runs.
            async with self._turns.turn():
                self._unchecked = 0
                try:
                    await anyio.to_thread.run_sync(self._checkpoint_sync)
                except Exception:
                    log.exception("journal checkpoint failed; the next one will try again")

    def _checkpoint_sync(self) -> None:
        with self._lock:
            self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _closed(self) -> bool:
        return self._conn is None

    async def _write_batch(self, batch: Batch[list[Row]], retry: bool) -> dict[str, int]:
        # A retry writes the same again: events are inserted once, records replaced.
        runs, rows, threads = list(batch.runs.values()), batch.rows, list(batch.threads.values())
        size = self._inline_size(rows)
        if size is not None and self._lock.acquire(blocking=False):
            try:
                self._write_locked(runs, rows, threads)
            finally:
                self._lock.release()
        else:
            await anyio.to_thread.run_sync(self._write, runs, rows, threads)
            size = sum(len(row[4]) for row in rows)
        self._unchecked += size
        if self._unchecked >= CHECKPOINT_BYTES:
            self._checkpoint_due.set()
        marks: dict[str, int] = {}
        for row in rows:
            marks[row[0]] = row[1]
        return marks

    def _inline_size(self, rows: list[Row]) -> int | None:
        """The bytes of a commit small enough for the event loop, or None."""
        if self.synchronous != "normal" or len(rows) > INLINE_MAX_ROWS:
            return None
        size = sum(len(row[4]) for row in rows)
        return size if size <= INLINE_MAX_BYTES else None

    def _write(self, runs: list[RunRecord], rows: list[Row], threads: list[ThreadInfo]) -> None:
        with self._lock:
            self._write_locked(runs, rows, threads)

    def _write_locked(
        self, runs: list[RunRecord], rows: list[Row], threads: list[ThreadInfo]
    ) -> None:
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            conn.executemany(
                "INSERT OR IGNORE INTO events (run_id, seq, ts, kind, data) VALUES (?,?,?,?,?)",
                rows,
            )
            conn.executemany(
                "INSERT INTO runs (id, thread_id, record, state, created_at, finished_at) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET record=excluded.record, "
                "state=excluded.state, finished_at=excluded.finished_at",
                [
                    (r.id, r.thread_id, _encode(r), r.state, r.created_at, r.finished_at)
                    for r in runs
                ],
            )
            if threads:
                conn.executemany(
                    "INSERT OR REPLACE INTO threads (id, created_at, record) VALUES (?,?,?)",
                    [(t.id, t.created_at, _encode(t)) for t in threads],
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # --- reading --------------------------------------------------------------------------

    async def load_run(self, run_id: str) -> RunRecord | None:
        pending = self._runs.get(run_id)
        if pending is not None:
            return pending
        rows = await self._query("SELECT record FROM runs WHERE id = ?", (run_id,))
        return _decode_record(rows[0][0]) if rows else None

    async def load_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> list[Envelope]:
        return await anyio.to_thread.run_sync(self._events_sync, run_id, after, limit, max_bytes)

    def _events_sync(
        self, run_id: str, after: int, limit: int | None, max_bytes: int | None
    ) -> list[Envelope]:
        sql = "SELECT seq, ts, kind, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"
        params: tuple[Any, ...] = (run_id, after)
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        out: list[Envelope] = []
        total = 0
        with self._read_lock:
            # Stepped row by row: a page bounded in bytes reads no more rows than it keeps.
            cursor = self._reading().execute(sql, params)
            try:
                for seq, ts, kind, data in cursor:
                    total += len(data) + EVENT_OVERHEAD_BYTES
                    if out and max_bytes is not None and total > max_bytes:
                        break
                    out.append(Envelope(run_id, seq, ts, kind, _decode_data(data)))
            finally:
                cursor.close()
        return out

    async def list_runs(
        self, limit: int, thread_id: str | None = None, owner: Owner | None = None
    ) -> list[RunRecord]:
        where: list[str] = []
        params: list[Any] = []
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(thread_id)
        if owner is not None:
            where.append(_OWNED)
            params += [owner.subject, owner.tenant]
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        sql = f"SELECT record FROM runs {clause}ORDER BY created_at DESC LIMIT ?"
        rows = await self._query(sql, (*params, limit))
        return [_decode_record(r[0]) for r in rows]

    async def load_thread(self, thread_id: str) -> ThreadInfo | None:
        pending = self._threads.get(thread_id)
        if pending is not None:
            return pending
        rows = await self._query("SELECT record FROM threads WHERE id = ?", (thread_id,))
        return _decode_thread(rows[0][0]) if rows else None

    async def list_threads(self, limit: int, owner: Owner | None = None) -> list[ThreadInfo]:
        if owner is None:
            sql, params = "SELECT record FROM threads ORDER BY created_at DESC LIMIT ?", (limit,)
        else:
            sql = f"SELECT record FROM threads WHERE {_OWNED} ORDER BY created_at DESC LIMIT ?"
            params = (owner.subject, owner.tenant, limit)  # type: ignore[assignment]
        rows = await self._query(sql, params)
        return [_decode_thread(r[0]) for r in rows]

    # --- retention ------------------------------------------------------------------------

    async def delete(self, run_ids: list[str]) -> None:
        if run_ids:
            await anyio.to_thread.run_sync(self._delete_sync, run_ids)

    def _delete_sync(self, run_ids: list[str]) -> None:
        conn = self._connection()
        with self._lock:
            conn.execute("BEGIN")
            conn.executemany("DELETE FROM events WHERE run_id = ?", [(i,) for i in run_ids])
            conn.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in run_ids])
            drop_refs(conn, run_ids)
            conn.execute("COMMIT")

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        rows = await self._query(
            "SELECT id FROM runs WHERE state = 'finished' AND (finished_at < ? OR id NOT IN "
            "(SELECT id FROM runs ORDER BY created_at DESC LIMIT ?))",
            (older_than_ns, keep),
        )
        doomed = [r[0] for r in rows]
        await self.delete(doomed)
        return doomed

    async def forget_thread(self, thread_id: str) -> bool:
        # A record still queued is committed first: the delete below then finds it, and no
        # later commit brings it back.
        await self.flush()
        return await anyio.to_thread.run_sync(self._forget_thread_sync, thread_id)

    def _forget_thread_sync(self, thread_id: str) -> bool:
        with self._lock:
            cursor = self._connection().execute("DELETE FROM threads WHERE id = ?", (thread_id,))
            return cursor.rowcount > 0

    async def prune_threads(self, *, keep: int, older_than_ns: int) -> None:
        await anyio.to_thread.run_sync(self._prune_threads_sync, keep, older_than_ns)

    def _prune_threads_sync(self, keep: int, older_than_ns: int) -> None:
        # The index on created_at: the OFFSET walks at most ``keep`` entries of it, and the
        # delete is a range of it (nothing at all in the common case).
        with self._lock:
            self._connection().execute(
                "DELETE FROM threads WHERE created_at < ? OR created_at < "
                "(SELECT created_at FROM threads ORDER BY created_at DESC LIMIT 1 OFFSET ?)",
                # No created_at is negative; an age bound beyond 1970 is beyond SQLite's ints.
                (max(older_than_ns, 0), keep - 1),
            )

    async def aclose(self) -> None:
        if self._conn is None:
            return
        if not await self._drain():
            rows = self._rows + (self._failed.rows if self._failed else [])
            log.error("journal: %d events could not be committed before closing", len(rows))
        conn, self._conn = self._conn, None
        reader, self._reader = self._reader, None
        if reader is not None:
            await anyio.to_thread.run_sync(reader.close)
        # The last connection to close checkpoints what is left in the log.
        await anyio.to_thread.run_sync(conn.close)

    async def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            with self._read_lock:
                return self._reading().execute(sql, params).fetchall()

        return await anyio.to_thread.run_sync(run)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("journal is not open")
        return self._conn

    def _reading(self) -> sqlite3.Connection:
        if self._reader is None:
            raise RuntimeError("journal is not open")
        return self._reader
