"""The instances sharing a PostgreSQL journal, through a Redis bus (``--bus redis://…``).

What is durable stays in PostgreSQL: runs, events, threads and which instance owns each
running run (``runs.instance``). Redis carries only what may be lost and rebuilt: each
instance's lease, thread claims, commands to a run's owner (as with the Redis journal:
gateway.journal.redis_membership, whose machinery this reuses), and the doorbell of live
fan-out — after each commit the owner publishes, for each run, its last committed seq; the
instances following that run read the new events from PostgreSQL. A doorbell lost (Redis
restarting) costs latency, not events: every followed run is also read every ``POLL_S``.

A run whose owner's lease is gone is ended in PostgreSQL by the first survivor that sees it
(one transaction: the run's row locked, its owner and last seq checked, one terminal
``completion{failed, reason: owner_lost}`` appended). A lease counts as gone only once it has
been missing for a whole lease period as this instance sees it: a Redis that restarted empty
has lost every lease, and live instances renew theirs within a third of one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec
from redis.exceptions import RedisError

from ...contracts.ports import Unavailable
from .base import Deliver, RunRecord
from .postgres import PostgresJournal, decode_run, envelope
from .postgres_link import FAILURES, UNAVAILABLE
from .postgres_queue import PostgresRunQueue
from .redis_link import RedisLink
from .redis_membership import RedisMembership
from .redis_takeover import Taken

log = logging.getLogger("loopgate.journal")

POLL_S = 1.0
# Leases an instance is silent for before it leaves the directory of instances.
DIRECTORY_LEASES = 10
FOLLOW_PAGE = 512
BELL_TIMEOUT_S = 1.0
RETRY_MAX_S = 1.0

REAPER_FAILURES: tuple[type[Exception], ...] = (RedisError, Unavailable, *FAILURES)

_encode = msgspec.json.Encoder().encode
_decode_marks = msgspec.json.Decoder(dict[str, int]).decode

# Followed runs' events after each one's cursor, a page per run.
_FOLLOW = (
    "SELECT w.run_id, e.seq, e.ts, e.kind, e.data "
    "FROM unnest(%s::text[], %s::bigint[]) AS w(run_id, after) CROSS JOIN LATERAL "
    "(SELECT seq, ts, kind, data FROM events WHERE run_id = w.run_id AND seq > w.after "
    "ORDER BY seq LIMIT %s) AS e ORDER BY w.run_id, e.seq"
)


@dataclass
class _Watch:
    cursor: int
    deliver: Deliver
    failed: Callable[[], None]


class PostgresMembership(RedisMembership):
    def __init__(
        self, link: RedisLink, journal: PostgresJournal, commit_trouble: Callable[[], str | None]
    ) -> None:
        super().__init__(link, commit_trouble)
        self.journal = journal
        # The queue's order and takers in Redis, each waiting run's record in PostgreSQL.
        self.run_queue = PostgresRunQueue(link, self)
        self._watched: dict[str, _Watch] = {}
        self._due: set[str] = set()
        self._wake = anyio.Event()
        # Doorbells to ring and thread claims to release, after commits (best effort).
        self._bells: dict[str, int] = {}
        self._releases: list[tuple[str, str]] = []
        self._bell = anyio.Event()
        # Instances whose lease this one found missing, and since when (its clock).
        self._missing: dict[str, float] = {}

    @property
    def full(self) -> bool:
        """Nothing this instance writes can be committed right now: Redis is full (its lease
        cannot be renewed), or PostgreSQL refuses or does not answer its commits. New runs
        and pushes are answered 503 at once meanwhile."""
        return self._commit_trouble() is not None or super().full

    async def serve(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat)
            tg.start_soon(self._reaper)
            tg.start_soon(self._serve_commands)
            tg.start_soon(self._follow)
            tg.start_soon(self._listen)
            tg.start_soon(self._ring)

    # --- after the storage's commits --------------------------------------------------------

    def committed(  # type: ignore[override]
        self, records: Iterable[RunRecord], lost: list[str], marks: dict[str, int]
    ) -> None:
        records = list(records)
        for record in records:
            if self.threads.holds_for(record):
                self._releases.append((record.thread_id, record.id))
        super().committed(records, lost)
        if marks or self._releases:
            self._bells.update(marks)
            self._bell.set()

    async def _ring(self) -> None:
        """Publish what was committed (the followers' doorbell) and free the threads of runs
        that ended: best effort, after the commit, never holding the next one."""
        channel = self.link.key("commits")
        while True:
            await self._bell.wait()
            self._bell = anyio.Event()
            bells, self._bells = self._bells, {}
            releases, self._releases = self._releases, []
            with anyio.move_on_after(BELL_TIMEOUT_S), suppress(RedisError, OSError):
                if bells:
                    await self.link.client().publish(channel, _encode(bells))
                for thread_id, run_id in releases:
                    # Not released: the claim is renewed no more, and lapses within a lease.
                    await self.threads.release(thread_id, run_id)

    # --- views of other instances' runs ---------------------------------------------------

    async def watch(
        self, run_id: str, after: int, deliver: Deliver, failed: Callable[[], None]
    ) -> None:
        self._watched[run_id] = _Watch(after, deliver, failed)
        self._due.add(run_id)
        self._wake.set()

    def unwatch(self, run_id: str) -> None:
        self._watched.pop(run_id, None)
        self._due.discard(run_id)

    async def _listen(self) -> None:
        """The doorbell: which followed runs have new events committed."""
        delay = 0.05
        while True:
            pubsub = self.link.client().pubsub()
            try:
                await pubsub.subscribe(self.link.key("commits"))
                delay = 0.05
                # Subscribed anew: what was rung meanwhile is read now.
                self._due.update(self._watched)
                self._wake.set()
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=self.link.lease_s / 3
                    )
                    if message is None:
                        await pubsub.ping()  # a connection Redis lost unseen fails here
                        continue
                    with suppress(msgspec.DecodeError):
                        marks = _decode_marks(message["data"])
                        for run_id, seq in marks.items():
                            watch = self._watched.get(run_id)
                            if watch is not None and seq > watch.cursor:
                                self._due.add(run_id)
                                self._wake.set()
            except (RedisError, OSError):
                log.warning("journal: the Redis doorbell was lost; followed runs are polled")
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            finally:
                with anyio.CancelScope(shield=True), suppress(RedisError, OSError):
                    await pubsub.aclose()

    async def _follow(self) -> None:
        """Read the due runs' new events from PostgreSQL; every followed run each POLL_S."""
        while True:
            with anyio.move_on_after(POLL_S) as timer:
                await self._wake.wait()
            self._wake = anyio.Event()
            due = set(self._watched) if timer.cancelled_caught else self._due & set(self._watched)
            self._due.clear()
            if not due:
                continue
            try:
                await self._read(due)
            except FAILURES:
                log.warning("journal: reading followed runs from PostgreSQL failed; retrying")
                self._due.update(due)
                await anyio.sleep(POLL_S)

    async def _read(self, due: set[str]) -> None:
        ids = sorted(due)
        cursors = [self._watched[i].cursor for i in ids]
        async with self.journal.link.connection() as conn:
            cur = await conn.execute(_FOLLOW, (ids, cursors, FOLLOW_PAGE))
            rows = await cur.fetchall()
        by_run: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            by_run.setdefault(row[0], []).append(row)
        for run_id, found in by_run.items():
            watch = self._watched.get(run_id)
            if watch is None or found[0][1] != watch.cursor + 1:
                continue  # let go of, or watched anew, while the read was out
            try:
                envs = [envelope(*row) for row in found]
                watch.cursor = envs[-1].seq
                watch.deliver(envs, [len(row[4]) for row in found])
            except Exception:
                log.exception("following run %s failed; its view here is let go", run_id)
                self.unwatch(run_id)
                watch.failed()
                continue
            if len(found) >= FOLLOW_PAGE:
                self._due.add(run_id)  # more than a page: the rest next round
                self._wake.set()

    # --- owners -----------------------------------------------------------------------------

    async def owner(self, run_id: str) -> str | None:
        try:
            async with self.journal.link.connection() as conn:
                cur = await conn.execute(
                    "SELECT instance FROM runs WHERE id = %s AND state = 'running'", (run_id,)
                )
                row = await cur.fetchone()
        except FAILURES:
            raise Unavailable(UNAVAILABLE, retry_after=1) from None
        return str(row[0]) if row is not None and row[0] is not None else None

    def commit_ownership(self, pipe: Any, record: RunRecord) -> None:
        raise NotImplementedError("ownership is committed in PostgreSQL, with the run")

    # --- lost instances -----------------------------------------------------------------------

    async def _reaper(self) -> None:
        while True:
            await self.reaper_pause()
            try:
                await self.end_orphans()
            except REAPER_FAILURES:
                log.exception("journal: looking for runs of lost instances failed; retrying")

    async def end_orphans(self) -> list[str]:
        """End (or take over: gateway.journal.redis_takeover) the running runs of instances
        whose lease has been gone for a lease period, and take the runs handed over."""
        if self.lease_trouble is not None:
            return []  # Redis out of this instance's reach: no lease can be judged
        await self.take_released()
        journal = self.journal
        # The directory of instances (each one's last renewal) is Redis's only record of
        # them here: those silent for many leases leave it, or it would grow by one an
        # instance started, for good.
        silent_ms = time.time_ns() // 1_000_000 - int(DIRECTORY_LEASES * self.link.lease_s * 1000)
        await self.link.client().zremrangebyscore(self.link.key("instances"), "-inf", silent_ms)
        async with journal.link.connection() as conn:
            cur = await conn.execute(
                "SELECT DISTINCT instance FROM runs WHERE state = 'running' AND instance <> %s",
                (self.link.instance,),
            )
            owners = [str(r[0]) for r in await cur.fetchall() if r[0] is not None]
        if not owners:
            self._missing.clear()
            return []
        pipe = self.link.client().pipeline(transaction=False)
        for instance in owners:
            pipe.exists(self.link.lease_key(instance))
        alive = await pipe.execute()
        now = anyio.current_time()
        dead: list[str] = []
        for instance, live in zip(owners, alive, strict=True):
            if live:
                self._missing.pop(instance, None)
                continue
            since = self._missing.setdefault(instance, now)
            if now - since >= self.link.lease_s:
                dead.append(instance)
        self._missing = {i: t for i, t in self._missing.items() if i in owners}
        ended: list[str] = []
        for instance in dead:
            async with journal.link.connection() as conn:
                cur = await conn.execute(
                    "SELECT id FROM runs WHERE state = 'running' AND instance = %s", (instance,)
                )
                run_ids = [str(r[0]) for r in await cur.fetchall()]
            for run_id in run_ids:
                taken = await self._take(run_id, instance)
                if taken != "refused":
                    continue  # resumed here, ended meanwhile, or left to another instance
                record = await self._end_orphan_pg(run_id, instance)
                if record is not None:
                    ended.append(run_id)
                    with suppress(RedisError, OSError):
                        await self.threads.release(record.thread_id, run_id)
        return ended

    async def end_unanswered(self, run_id: str) -> bool:
        """Not here: a run ended in PostgreSQL over its silent owner's head stays running in
        that owner's memory until it commits to it again (an idle ingest run only at its idle
        timeout), since nothing tells an owner here that its run ended elsewhere: a cancel
        sent while its command channel was down (Redis restarting) is never applied. A cancel
        its owner does not answer is refused (retry) instead (docs/scale.md)."""
        return False

    async def _end_lost(self, run_id: str, owner: str) -> bool:
        return await self._end_orphan_pg(run_id, owner) is not None

    async def _take(self, run_id: str, owner: str) -> Taken:
        """Take ``owner``'s run over in PostgreSQL (the row locked, its owner and state
        checked, ``instance`` set to this one with the new attempt), then resume it."""
        async with self.journal.link.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record, last_seq, instance, state FROM runs WHERE id = %s FOR UPDATE",
                (run_id,),
            )
            row = await cur.fetchone()
            if row is None or row[2] != owner or row[3] != "running":
                return "ended"
            record = decode_run(row[0], await _last_seq(conn, run_id, int(row[1])))
            verdict = self.takeover.verdict(record)
            if verdict != "resume":
                return "left" if verdict == "leave" else "refused"
            record.attempt += 1
            await conn.execute(
                "UPDATE runs SET record = %s, instance = %s WHERE id = %s",
                (_encode(record), self.link.instance, run_id),
            )
        taken = await self.takeover.start(record, owner)
        if taken == "failed":
            await self._end_lost(run_id, self.link.instance)
        return taken

    async def _end_orphan_pg(self, run_id: str, owner: str) -> RunRecord | None:
        record = await self.end_row(run_id, owner, "running", "failed", "owner_lost")
        if record is not None:
            log.warning("run %s: its instance %s is gone; ended it (owner_lost)", run_id, owner)
        return record

    async def end_row(
        self, run_id: str, owner: str | None, state: str, status: str, reason: str
    ) -> RunRecord | None:
        """End a run in PostgreSQL with one terminal ``completion{status, reason}``, only if
        it still is in ``state`` under ``owner`` (None: a queued run, which no instance owns
        yet): a compare-and-set on its locked row. Its record, or None when it was not so."""
        async with self.journal.link.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT record, last_seq, instance, state FROM runs WHERE id = %s FOR UPDATE",
                (run_id,),
            )
            row = await cur.fetchone()
            if row is None or row[2] != owner or row[3] != state:
                return None  # ended (or begun) meanwhile, or not that instance's
            last = await _last_seq(conn, run_id, int(row[1]))
            record = decode_run(row[0], last)
            now = time.time_ns()
            record.state, record.status = "finished", status
            record.finished_at, record.last_seq = now, last + 1
            data = _encode({"status": status, "reason": reason})
            await conn.execute(
                "INSERT INTO events (run_id, seq, ts, kind, data) VALUES (%s, %s, %s, %s, %s)",
                (run_id, last + 1, now, "completion", data),
            )
            await conn.execute(
                "UPDATE runs SET record = %s, state = 'finished', finished_at = %s, "
                "last_seq = %s, instance = %s, request = NULL WHERE id = %s",
                (_encode(record), now, last + 1, self.link.instance, run_id),
            )
        self.ring(run_id, last + 1)
        if self.on_ended is not None:
            self.on_ended(run_id, reason)  # the row lock chose this instance
        return record

    def ring(self, run_id: str, seq: int) -> None:
        """Tell the followers of a run that it has events up to ``seq`` committed."""
        self._bells[run_id] = seq
        self._bell.set()


async def _last_seq(conn: Any, run_id: str, recorded: int) -> int:
    """A run's last committed seq: its row's, or its last event's if that is further."""
    cur = await conn.execute(
        "SELECT coalesce(max(seq), 0) FROM events WHERE run_id = %s", (run_id,)
    )
    found = await cur.fetchone()
    return max(recorded, int(found[0]) if found else 0)
