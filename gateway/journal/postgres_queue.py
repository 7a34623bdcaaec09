"""The run queue of instances sharing a PostgreSQL journal through a Redis bus (docs/scale.md:
the run queue).

The queue itself — ids in order, each taker's list, who takes — is Redis's, as with the Redis
journal (gateway.journal.redis_queue, whose taking, positions and lost takers' lists this
reuses). What must not be lost is PostgreSQL's: a waiting run is a row in state ``queued`` with
no instance, holding the start request it is begun from. *Begin* is a compare-and-set on that
row (still ``queued``, no instance → ``running`` under this instance); so is ending a run
that waits (a cancel, or a run taken too often), which appends its one terminal event, seq 1,
in the same transaction. Whichever commits first wins: a run is begun or ended, once.

Redis losing the queue (a restart with nothing persisted) loses no run: a worker finds the
``queued`` rows older than a lease that Redis holds no entry for and queues them again, oldest
first. An id queued twice that way is harmless: the second taker's begin finds the row no
longer ``queued``, and drops it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import msgspec
from redis.exceptions import RedisError

from ...contracts.ports import RunExists
from .base import RunRecord
from .postgres import decode_run
from .postgres_link import FAILURES
from .postgres_link import reaching as reaching_postgres
from .redis_link import RedisLink
from .redis_link import reaching as reaching_redis
from .redis_queue import MAX_TAKES, RedisRunQueue

if TYPE_CHECKING:
    from .postgres_cluster import PostgresMembership

log = logging.getLogger("loopgate.journal")

# Queued rows looked at per round for entries Redis lost (the oldest first).
RESTORE_PAGE = 256

_encode = msgspec.json.Encoder().encode

# KEYS: queue, entry. ARGV: limit, run id. The run's place; -1 when the queue is full. An
# entry there already (put back by a worker that found Redis had lost it) keeps its place.
_PUSH = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  local at = redis.call('LPOS', KEYS[1], ARGV[2])
  if at then return at + 1 end
end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
redis.call('HSET', KEYS[2], 'takes', 0)
return redis.call('RPUSH', KEYS[1], ARGV[2])
"""

# KEYS: queue, entry. ARGV: run id. 1: queued again (Redis had no entry for it), 0: it has one.
_RESTORE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], 'takes', 0)
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
"""

# KEYS: this taker's list, queue. ARGV: run id. Back at the front of the queue, if still taken.
_GIVE_BACK = """
if redis.call('LREM', KEYS[1], 0, ARGV[1]) == 0 then return 0 end
return redis.call('LPUSH', KEYS[2], ARGV[1])
"""

# KEYS: the lost taker's list, queue, entry. ARGV: run id, MAX_TAKES. 1: queued again at the
# front, 2: taken too often (to be ended), 0: another survivor moved it first.
_MOVE_BACK = """
if redis.call('LREM', KEYS[1], 0, ARGV[1]) == 0 then return 0 end
if redis.call('HINCRBY', KEYS[3], 'takes', 1) > tonumber(ARGV[2]) then return 2 end
redis.call('LPUSH', KEYS[2], ARGV[1])
return 1
"""

_INSERT = (
    "INSERT INTO runs (id, thread_id, record, state, created_at, last_seq, instance, "
    "owner_subject, owner_tenant, request) VALUES (%s, %s, %s, 'queued', %s, 0, NULL, %s, %s, "
    "%s) ON CONFLICT (id) DO NOTHING"
)
_WAITING = "state = 'queued' AND instance IS NULL"


class PostgresRunQueue(RedisRunQueue):
    membership: PostgresMembership

    def __init__(self, link: RedisLink, membership: PostgresMembership) -> None:
        super().__init__(link, membership)
        # Runs whose begin failed with its outcome unknown (PostgreSQL did not answer): made
        # ``queued`` again and given back to the queue at the next look (``requeue_lost``).
        self._unsettled: dict[str, RunRecord] = {}

    # --- accepting --------------------------------------------------------------------------

    async def push(self, record: RunRecord, request: bytes, limit: int) -> int | None:
        # The row first: a taker that finds the id finds the run. The request is a start's
        # body, within max_body_bytes, and goes with the row once the run begins or ends.
        await self._insert(record, request)
        try:
            place = await self._push_id(record.id, limit)
        except BaseException:
            await self._withdraw(record.id)
            raise
        if place is None:
            await self._withdraw(record.id)
        return place

    @reaching_postgres
    async def _insert(self, record: RunRecord, request: bytes) -> None:
        owner = record.owner
        async with self.membership.journal.link.connection() as conn:
            cur = await conn.execute(
                _INSERT,
                (
                    record.id,
                    record.thread_id,
                    _encode(record),
                    record.created_at,
                    owner.subject if owner else None,
                    owner.tenant if owner else None,
                    request,
                ),
            )
            if cur.rowcount == 0:
                raise RunExists(record.id)

    @reaching_redis
    async def _push_id(self, run_id: str, limit: int) -> int | None:
        keys = [self.link.key("queue"), self._entry_key(run_id)]
        place = int(await self._script(_PUSH)(keys=keys, args=[limit, run_id]))
        return place if place > 0 else None

    async def _withdraw(self, run_id: str) -> None:
        """Take back a row whose id the queue did not take (full, or Redis away). Should this
        fail too, the row waits without an entry, and a worker queues it within a lease or so
        once Redis answers (``_restore``): run, rather than lost."""
        try:
            async with self.membership.journal.link.connection() as conn:
                await conn.execute(f"DELETE FROM runs WHERE id = %s AND {_WAITING}", (run_id,))
        except Exception:
            log.warning("run %s: its queued row could not be withdrawn; it runs later", run_id)

    # --- taking -----------------------------------------------------------------------------

    async def entry(self, run_id: str) -> tuple[RunRecord, bytes] | None:
        try:
            async with self.membership.journal.link.connection() as conn:
                cur = await conn.execute(
                    f"SELECT record, last_seq, request FROM runs WHERE id = %s AND {_WAITING}",
                    (run_id,),
                )
                row = await cur.fetchone()
        except FAILURES:
            # Taken, and held by a live taker: nobody else would ever put it back.
            await self._give_back(run_id)
            raise
        if row is None or row[2] is None:
            await self._forget(run_id)
            return None
        return decode_run(row[0], int(row[1])), bytes(row[2])

    async def begin(self, record: RunRecord) -> bool:
        running = msgspec.structs.replace(record, state="running")
        # The request stays until the worker's first commit of the run (gateway.journal.
        # postgres drops it then): a begin undone (``_settle``) is begun again from it.
        try:
            async with self.membership.journal.link.connection() as conn:
                cur = await conn.execute(
                    "UPDATE runs SET state = 'running', instance = %s, record = %s "
                    f"WHERE id = %s AND {_WAITING}",
                    (self.link.instance, _encode(running), record.id),
                )
                begun = cur.rowcount == 1
        except FAILURES:
            self._unsettled[record.id] = record
            raise
        # Its row says whose it is now (what the reaper reads): the entry has had its use.
        await self._forget(record.id)
        return begun

    async def _give_back(self, run_id: str) -> None:
        keys = [self._taken_key(self.link.instance), self.link.key("queue")]
        await self._script(_GIVE_BACK)(keys=keys, args=[run_id])

    async def _settle(self) -> None:
        """Undo the begins whose outcome is unknown (the run is not started here), and give
        their runs back to the queue's front."""
        for run_id, record in list(self._unsettled.items()):
            async with self.membership.journal.link.connection() as conn:
                await conn.execute(
                    "UPDATE runs SET state = 'queued', instance = NULL, record = %s "
                    "WHERE id = %s AND state = 'running' AND instance = %s",
                    (_encode(record), run_id, self.link.instance),
                )
            await self._give_back(run_id)
            del self._unsettled[run_id]
            log.warning("run %s: its begin was not confirmed; queued again", run_id)

    async def _forget(self, run_id: str) -> None:
        """Drop what Redis holds of a run that waits no more (in this taker's list)."""
        pipe = self.link.client().pipeline(transaction=False)
        pipe.lrem(self._taken_key(self.link.instance), 0, run_id)
        pipe.delete(self._entry_key(run_id))
        await pipe.execute()

    # --- ending a run that waits ------------------------------------------------------------

    @reaching_postgres
    async def end(self, run_id: str, status: str, reason: str) -> bool:
        if await self.membership.end_row(run_id, None, "queued", status, reason) is None:
            return False
        try:
            pipe = self.link.client().pipeline(transaction=False)
            pipe.lrem(self.link.key("queue"), 0, run_id)
            pipe.delete(self._entry_key(run_id))
            await pipe.execute()
        except (RedisError, OSError):
            # Ended all the same: a taker of the id left behind finds it so, and drops it.
            log.warning("run %s: ended, but its queue entry stays until taken", run_id)
        return True

    async def fail_begun(self, run_id: str, reason: str) -> None:
        membership = self.membership
        record = await membership.end_row(run_id, self.link.instance, "running", "failed", reason)
        if record is not None:
            await membership.threads.release(record.thread_id, run_id)

    # --- runs lost with a taker, or with Redis ----------------------------------------------

    async def _requeue(self, taken: str, run_id: str) -> bool:
        async with self.membership.journal.link.connection() as conn:
            cur = await conn.execute(f"SELECT 1 FROM runs WHERE id = %s AND {_WAITING}", (run_id,))
            waiting = await cur.fetchone() is not None
        keys = [taken, self.link.key("queue"), self._entry_key(run_id)]
        if not waiting:
            await self.link.client().lrem(taken, 0, run_id)
            await self.link.client().delete(keys[2])
            return False
        moved = int(await self._script(_MOVE_BACK)(keys=keys, args=[run_id, MAX_TAKES]))
        if moved == 2:
            await self.end(run_id, "failed", "worker_lost")
        return moved == 1

    async def requeue_lost(self) -> list[str]:
        await self._settle()
        return [*await super().requeue_lost(), *await self._restore()]

    async def _restore(self) -> list[str]:
        """Queue again the runs waiting in PostgreSQL that Redis holds no entry for (it lost
        them), oldest first; only those older than a lease, whose accept is long done."""
        before = time.time_ns() - int(self.link.lease_s * 1e9)
        async with self.membership.journal.link.connection() as conn:
            cur = await conn.execute(
                f"SELECT id FROM runs WHERE {_WAITING} AND created_at < %s "
                "ORDER BY created_at LIMIT %s",
                (before, RESTORE_PAGE),
            )
            run_ids = [str(row[0]) for row in await cur.fetchall()]
        if not run_ids:
            return []
        # One round trip to find the few (usually none) Redis lost, rather than one a run.
        pipe = self.link.client().pipeline(transaction=False)
        for run_id in run_ids:
            pipe.exists(self._entry_key(run_id))
        known = await pipe.execute()
        restored: list[str] = []
        for run_id, entry in zip(run_ids, known, strict=True):
            keys = [self.link.key("queue"), self._entry_key(run_id)]
            if not entry and int(await self._script(_RESTORE)(keys=keys, args=[run_id])):
                log.warning("run %s: its queue entry was lost with Redis; queued again", run_id)
                restored.append(run_id)
        return restored
