"""PostgreSQL journal: runs, threads, events and which instance owns each running run, in
PostgreSQL (docs/scale.md). With ``--bus redis://…`` several instances share it, Redis carrying
only what can be lost — live fan-out, leases, thread claims and commands
(gateway.journal.postgres_cluster); without, it serves one instance.

Like SQLite's and Redis's, ``record_*`` only queue; ``writer`` commits whatever is queued in one
transaction as soon as the previous one is done (gateway.journal.group_commit), and an event is
acknowledged (shown to subscribers, its push answered) once that transaction committed: what
Redis then loses is never an acknowledged event.

A commit first locks the rows of its runs. One that another instance wrote since (a survivor
ended it, its owner thought gone) is refused whole and reported lost, as the Redis journal
does: two instances never both append to one run. A resent commit (its answer lost) inserts
nothing twice: events are keyed by (run, seq).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any, LiteralString

import anyio
import msgspec

from ...contracts.envelope import Envelope
from ...contracts.ports import ThreadInfo
from ...contracts.principal import Owner
from .base import EVENT_OVERHEAD_BYTES, RunRecord
from .group_commit import Batch, GroupCommit
from .postgres_blobs import PostgresBlobs, drop_refs
from .postgres_link import FAILURES, PostgresLink, reaching, trouble

log = logging.getLogger("loopgate.journal")

# (run_id, seq, ts, kind, encoded data)
Row = tuple[str, int, int, str, bytes]

_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(RunRecord).decode
_decode_thread = msgspec.json.Decoder(ThreadInfo).decode
_decode_data = msgspec.json.Decoder(dict[str, Any]).decode

# A run another instance wrote last (a survivor ended it, its owner thought gone) is not this
# instance's to write any more: its rows are left out of every statement of the commit (they
# were locked first). Without a bus, ``me`` is NULL and every run is this instance's.
_FOREIGN = (
    "EXISTS (SELECT 1 FROM runs r WHERE r.id = {} AND %(me)s::text IS NOT NULL "
    "AND r.instance IS NOT NULL AND r.instance <> %(me)s)"
)
# Locked in one order (sorted): two commits never wait on each other in a ring.
_LOCK = "SELECT id, instance FROM runs WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
_INSERT_EVENTS = (
    "INSERT INTO events (run_id, seq, ts, kind, data) SELECT v.* FROM unnest(%(run_id)b::text[], "
    "%(seq)b::bigint[], %(ts)b::bigint[], %(kind)b::text[], %(data)b::bytea[]) "
    "AS v(run_id, seq, ts, kind, data) WHERE NOT " + _FOREIGN.format("v.run_id") + " "
    "ON CONFLICT DO NOTHING"
)
# Columns travel as binary arrays (%b): their text form costs the gateway twice the CPU (each
# bytea in hex, each value quoted) for the same statement.
# A finished record is never taken back by a running one (a late retry of an older commit).
# A queued run's start request goes with its worker's first commit of it: it has begun.
_UPSERT_RUNS = (
    "INSERT INTO runs (id, thread_id, record, state, created_at, finished_at, last_seq, "
    "instance, owner_subject, owner_tenant) SELECT v.* FROM unnest(%(id)b::text[], "
    "%(thread_id)b::text[], %(record)b::bytea[], %(state)b::text[], %(created_at)b::bigint[], "
    "%(finished_at)b::bigint[], %(last_seq)b::bigint[], %(instance)b::text[], "
    "%(subject)b::text[], %(tenant)b::text[]) AS v(id, thread_id, record, state, created_at, "
    "finished_at, last_seq, instance, owner_subject, owner_tenant) "
    "WHERE NOT " + _FOREIGN.format("v.id") + " "
    "ON CONFLICT (id) DO UPDATE SET record = excluded.record, state = excluded.state, "
    "finished_at = excluded.finished_at, last_seq = GREATEST(runs.last_seq, excluded.last_seq), "
    "request = NULL "
    "WHERE NOT (runs.state = 'finished' AND excluded.state = 'running')"
)
_ADVANCE = (
    "UPDATE runs SET last_seq = GREATEST(runs.last_seq, v.seq) "
    "FROM unnest(%(id)b::text[], %(seq)b::bigint[]) AS v(id, seq) WHERE runs.id = v.id "
    "AND NOT " + _FOREIGN.format("v.id")
)
_UPSERT_THREADS = (
    "INSERT INTO threads (id, created_at, record, owner_subject, owner_tenant) "
    "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bytea[], %s::text[], %s::text[]) "
    "ON CONFLICT (id) DO UPDATE SET record = excluded.record"
)
# Events read per round trip (a page bounded in bytes stops early).
READ_PAGE = 512


def decode_run(raw: bytes, last_seq: int) -> RunRecord:
    """A run's record; a running one's ``last_seq`` is its last committed event's (the
    record itself is written when the run starts and when it ends)."""
    record = _decode_record(raw)
    record.last_seq = max(record.last_seq, last_seq)
    return record


def envelope(run_id: str, seq: int, ts: int, kind: str, data: bytes) -> Envelope:
    return Envelope(run_id, seq, ts, kind, _decode_data(data))


class PostgresJournal(GroupCommit[list[Row]]):
    RETRYABLE = FAILURES

    def __init__(
        self,
        url: str,
        *,
        bus: str | None = None,
        max_events: int = 100_000,
        max_age_s: float = 24 * 3600.0,
        lease_s: float | None = None,
        prefix: str | None = None,
    ) -> None:
        super().__init__(list)
        self.link = PostgresLink(url)
        self.blobs = PostgresBlobs(self.link)
        self.cluster: Any = None
        self.instance = uuid.uuid4().hex[:16]
        if bus is not None:
            # Imported only with a bus: Redis is needed only when instances share the journal.
            from .postgres_cluster import PostgresMembership
            from .redis_link import RedisLink

            bus_link = RedisLink(
                bus, max_events=max_events, max_age_s=max_age_s, lease_s=lease_s, prefix=prefix
            )
            self.instance = bus_link.instance
            self.cluster = PostgresMembership(bus_link, self, lambda: self._commit_trouble)

    # --- lifecycle ------------------------------------------------------------------------

    async def open(self) -> list[RunRecord]:
        await self.link.open()
        if self.cluster is not None:
            try:
                await self.cluster.link.open()
                await self.cluster.join()
            except BaseException:
                await self.link.close()
                raise
            # A run a dead instance left open is ended by the first survivor that finds its
            # lease gone (the cluster's reaper), this one included.
            return []
        # Alone on this database: the runs a previous process left running are this one's to
        # end (the hub ends them), so its commits of their ends are its own.
        async with self.link.connection() as conn:
            cur = await conn.execute(
                "UPDATE runs SET instance = %s WHERE state = 'running' RETURNING record, last_seq",
                (self.instance,),
            )
            return [decode_run(raw, last) for raw, last in await cur.fetchall()]

    async def aclose(self) -> None:
        if self.link.closed:
            return
        if not await self._drain():
            rows = self._rows + (self._failed.rows if self._failed else [])
            log.error("journal: %d events could not be committed before closing", len(rows))
        if self.cluster is not None:
            await self.cluster.leave()
            await self.cluster.link.close()
        await self.link.close()

    @property
    def trouble(self) -> str | None:
        lease = self.cluster.lease_trouble if self.cluster is not None else None
        return self._commit_trouble or lease

    # --- writing --------------------------------------------------------------------------

    def record_event(self, envelope: Envelope, data: bytes) -> None:
        self._rows.append((envelope.run_id, envelope.seq, envelope.ts, envelope.kind, data))
        self._work.set()

    async def writer(self) -> None:
        if self.cluster is None:
            await self._commit_forever()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.cluster.serve)
            await self._commit_forever()

    def _closed(self) -> bool:
        return self.link.closed

    def _commit_failed(self, exc: Exception, delay: float) -> str | None:
        if self._commit_trouble is None:
            log.exception("journal commit failed; retrying (every %.2f s at most)", delay)
        return trouble(exc)

    async def _write_batch(self, batch: Batch[list[Row]], retry: bool) -> Mapping[str, int]:
        ids = sorted({*batch.runs, *(row[0] for row in batch.rows)})
        me = self.instance if self.cluster is not None else None
        marks: dict[str, int] = {}
        for row in batch.rows:
            marks[row[0]] = row[1]
        runs = list(batch.runs.values())
        # One round trip for the whole transaction (pipeline mode): the rows of its runs are
        # locked first, and each statement leaves out those another instance wrote last.
        async with self.link.connection() as conn:
            async with conn.pipeline(), conn.transaction():
                found = await conn.execute(_LOCK, (ids,))
                if batch.rows:
                    names = ("run_id", "seq", "ts", "kind", "data")
                    columns = dict(zip(names, _columns(batch.rows, 5), strict=True))
                    await conn.execute(_INSERT_EVENTS, columns | {"me": me})
                if runs:
                    await conn.execute(_UPSERT_RUNS, self._run_columns(runs, marks) | {"me": me})
                advanced = [(i, s) for i, s in marks.items() if i not in batch.runs]
                if advanced:
                    advanced_ids, seqs = _columns(advanced, 2)
                    await conn.execute(_ADVANCE, {"id": advanced_ids, "seq": seqs, "me": me})
                if batch.threads:
                    threads = list(batch.threads.values())
                    await conn.execute(
                        _UPSERT_THREADS,
                        (
                            [t.id for t in threads],
                            [t.created_at for t in threads],
                            [_encode(t) for t in threads],
                            [t.owner.subject if t.owner else None for t in threads],
                            [t.owner.tenant if t.owner else None for t in threads],
                        ),
                    )
            # What the statements left out (the rows were locked before any of them ran).
            lost = [
                str(run_id)
                for run_id, instance in await found.fetchall()
                if me is not None and instance is not None and instance != me
            ]
        for run_id in lost:
            log.error("run %s: another instance ended it; this instance's events refused", run_id)
            marks.pop(run_id, 0)
        if self.cluster is not None:
            self.cluster.committed([r for r in runs if r.id not in lost], lost, marks)
        return marks

    def _run_columns(self, runs: list[RunRecord], marks: dict[str, int]) -> dict[str, Any]:
        return {
            "id": [r.id for r in runs],
            "thread_id": [r.thread_id for r in runs],
            "record": [_encode(r) for r in runs],
            "state": [r.state for r in runs],
            "created_at": [r.created_at for r in runs],
            "finished_at": [r.finished_at for r in runs],
            "last_seq": [max(r.last_seq, marks.get(r.id, 0)) for r in runs],
            "instance": [self.instance for _ in runs],
            "subject": [r.owner.subject if r.owner else None for r in runs],
            "tenant": [r.owner.tenant if r.owner else None for r in runs],
        }

    # --- reading --------------------------------------------------------------------------

    async def _fetch(self, sql: LiteralString, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self.link.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchall()

    @reaching
    async def load_run(self, run_id: str) -> RunRecord | None:
        pending = self._runs.get(run_id)
        if pending is not None:
            return pending
        rows = await self._fetch("SELECT record, last_seq FROM runs WHERE id = %s", (run_id,))
        return decode_run(*rows[0]) if rows else None

    @reaching
    async def load_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> list[Envelope]:
        out: list[Envelope] = []
        total = 0
        while limit is None or len(out) < limit:
            count = READ_PAGE if limit is None else min(limit - len(out), READ_PAGE)
            rows = await self._fetch(
                "SELECT seq, ts, kind, data FROM events WHERE run_id = %s AND seq > %s "
                "ORDER BY seq LIMIT %s",
                (run_id, after, count),
            )
            for seq, ts, kind, data in rows:
                total += len(data) + EVENT_OVERHEAD_BYTES
                if out and max_bytes is not None and total > max_bytes:
                    return out
                out.append(envelope(run_id, seq, ts, kind, data))
            if len(rows) < count:
                break
            after = out[-1].seq
        return out

    @reaching
    async def list_runs(
        self, limit: int, thread_id: str | None = None, owner: Owner | None = None
    ) -> list[RunRecord]:
        where: list[LiteralString] = []
        params: list[Any] = []
        if thread_id is not None:
            where.append("thread_id = %s")
            params.append(thread_id)
        if owner is not None:
            where.append("owner_subject = %s AND owner_tenant = %s")
            params += [owner.subject, owner.tenant]
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        sql = f"SELECT record, last_seq FROM runs {clause}ORDER BY created_at DESC LIMIT %s"
        return [decode_run(*r) for r in await self._fetch(sql, (*params, limit))]

    @reaching
    async def load_thread(self, thread_id: str) -> ThreadInfo | None:
        pending = self._threads.get(thread_id)
        if pending is not None:
            return pending
        rows = await self._fetch("SELECT record FROM threads WHERE id = %s", (thread_id,))
        return _decode_thread(rows[0][0]) if rows else None

    @reaching
    async def list_threads(self, limit: int, owner: Owner | None = None) -> list[ThreadInfo]:
        if owner is None:
            sql = "SELECT record FROM threads ORDER BY created_at DESC LIMIT %s"
            rows = await self._fetch(sql, (limit,))
        else:
            sql = (
                "SELECT record FROM threads WHERE owner_subject = %s AND owner_tenant = %s "
                "ORDER BY created_at DESC LIMIT %s"
            )
            rows = await self._fetch(sql, (owner.subject, owner.tenant, limit))
        return [_decode_thread(r[0]) for r in rows]

    # --- retention: every row of a dropped run or thread goes -------------------------------

    @reaching
    async def delete(self, run_ids: list[str]) -> None:
        if not run_ids:
            return
        async with self.link.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM events WHERE run_id = ANY(%s)", (run_ids,))
            await conn.execute("DELETE FROM runs WHERE id = ANY(%s)", (run_ids,))
            await drop_refs(conn, self.link.schema, run_ids)

    @reaching
    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        rows = await self._fetch(
            "SELECT id FROM runs WHERE state = 'finished' AND (finished_at < %s OR id NOT IN "
            "(SELECT id FROM runs ORDER BY created_at DESC LIMIT %s))",
            (older_than_ns, keep),
        )
        doomed = [r[0] for r in rows]
        await self.delete(doomed)
        return doomed

    async def forget_thread(self, thread_id: str) -> bool:
        # A record still queued is committed first: the delete then finds it, and no later
        # commit brings it back.
        await self.flush()
        return await self._forget_thread(thread_id)

    @reaching
    async def _forget_thread(self, thread_id: str) -> bool:
        async with self.link.connection() as conn:
            cur = await conn.execute("DELETE FROM threads WHERE id = %s", (thread_id,))
            return cur.rowcount > 0

    @reaching
    async def prune_threads(self, *, keep: int, older_than_ns: int) -> None:
        async with self.link.connection() as conn:
            await conn.execute(
                "DELETE FROM threads WHERE created_at < %s OR created_at < "
                "(SELECT created_at FROM threads ORDER BY created_at DESC LIMIT 1 OFFSET %s)",
                (older_than_ns, keep - 1),
            )


def _columns(rows: list[Any], width: int) -> tuple[list[Any], ...]:
    """Rows as columns: what unnest() takes, one array per column."""
    if not rows:
        return tuple([] for _ in range(width))
    return tuple(list(column) for column in zip(*rows, strict=True))
