"""SQLite journal: embedded, durable, write-behind.

Appends are buffered in memory and written in batches by ``flush`` (the hub calls it on a short
interval and whenever a run finishes), so the producer never waits on the disk. One connection,
used from worker threads under a lock; WAL so reads do not block the writer.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import msgspec

from contracts.envelope import Envelope
from gateway.journal.base import RunRecord

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
"""

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(RunRecord).decode
_decode_data = msgspec.json.Decoder(dict[str, Any]).decode


class SqliteJournal:
    durable = True

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._runs: dict[str, RunRecord] = {}
        self._events: list[Envelope] = []
        # Two overlapping flushes could write an older run record after a newer one.
        self._flush_lock = anyio.Lock()

    async def open(self) -> list[RunRecord]:
        await anyio.to_thread.run_sync(self._open_sync)
        rows = await self._query("SELECT record FROM runs WHERE state = 'running'", ())
        return [_decode_record(r[0]) for r in rows]

    def _open_sync(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        self._conn = conn

    def record_run(self, record: RunRecord) -> None:
        self._runs[record.id] = msgspec.structs.replace(record)

    def record_event(self, envelope: Envelope) -> None:
        self._events.append(envelope)

    async def flush(self) -> None:
        async with self._flush_lock:
            if not self._runs and not self._events:
                return
            runs, self._runs = list(self._runs.values()), {}
            events, self._events = self._events, []
            await anyio.to_thread.run_sync(self._write, runs, events)

    def _write(self, runs: list[RunRecord], events: list[Envelope]) -> None:
        conn = self._connection()
        with self._lock:
            conn.execute("BEGIN")
            try:
                conn.executemany(
                    "INSERT OR IGNORE INTO events (run_id, seq, ts, kind, data) VALUES (?,?,?,?,?)",
                    [(e.run_id, e.seq, e.ts, e.kind, _encode(e.data)) for e in events],
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
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def load_run(self, run_id: str) -> RunRecord | None:
        pending = self._runs.get(run_id)
        if pending is not None:
            return pending
        rows = await self._query("SELECT record FROM runs WHERE id = ?", (run_id,))
        return _decode_record(rows[0][0]) if rows else None

    async def load_events(self, run_id: str) -> list[Envelope]:
        await self.flush()
        rows = await self._query(
            "SELECT seq, ts, kind, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        return [Envelope(run_id, seq, ts, kind, _decode_data(data)) for seq, ts, kind, data in rows]

    async def list_runs(self, limit: int, thread_id: str | None = None) -> list[RunRecord]:
        await self.flush()
        if thread_id is None:
            sql, params = "SELECT record FROM runs ORDER BY created_at DESC LIMIT ?", (limit,)
        else:
            sql = "SELECT record FROM runs WHERE thread_id = ? ORDER BY created_at DESC LIMIT ?"
            params = (thread_id, limit)  # type: ignore[assignment]
        rows = await self._query(sql, params)
        return [_decode_record(r[0]) for r in rows]

    async def delete(self, run_ids: list[str]) -> None:
        if run_ids:
            await anyio.to_thread.run_sync(self._delete_sync, run_ids)

    def _delete_sync(self, run_ids: list[str]) -> None:
        conn = self._connection()
        with self._lock:
            conn.execute("BEGIN")
            conn.executemany("DELETE FROM events WHERE run_id = ?", [(i,) for i in run_ids])
            conn.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in run_ids])
            conn.execute("COMMIT")

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        await self.flush()
        rows = await self._query(
            "SELECT id FROM runs WHERE state = 'finished' AND (finished_at < ? OR id NOT IN "
            "(SELECT id FROM runs ORDER BY created_at DESC LIMIT ?))",
            (older_than_ns, keep),
        )
        doomed = [r[0] for r in rows]
        await self.delete(doomed)
        return doomed

    async def aclose(self) -> None:
        if self._conn is None:
            return
        await self.flush()
        conn, self._conn = self._conn, None
        await anyio.to_thread.run_sync(conn.close)

    async def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            with self._lock:
                return self._connection().execute(sql, params).fetchall()

        return await anyio.to_thread.run_sync(run)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("journal is not open")
        return self._conn
