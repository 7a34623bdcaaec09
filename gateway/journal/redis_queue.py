"""The run queue the instances sharing a Redis journal share (docs/scale.md: the run queue).

A run accepted past an instance's room (or on an ``api`` instance) is written as a record in
state ``queued`` under the run's own keys, so every instance lists, describes and streams it
as any run (its stream is empty until it starts), and its id goes at the tail of one list,
``queue``. A worker with room moves the oldest id into its own ``queue-taken:<instance>``
(``BLMOVE``, bounded), then *begins* it: one script that, only if the record is still
``queued`` and has no owner, makes the record ``running`` under this instance (the owner key
and the owned set the reaper reads) and drops the entry. From there it is a run like the
others. A queued run ends (a cancel, say) through one script that checks the same: it is
either begun or ended, once.

A worker that dies between its take and its begin leaves the id in its taken list: any
worker finds its lease gone and puts the id back at the front of the queue, at most
``MAX_TAKES`` times; past that the run ends ``failed`` (``worker_lost``), so a run whose start
kills its worker cannot kill them all.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from ...contracts.ports import RunExists
from .base import RunRecord
from .redis_entries import decode_record, encode
from .redis_link import RedisLink, reaching, reading

if TYPE_CHECKING:
    from .redis_membership import RedisMembership

# How many times a run may be taken by a worker that died before it started it.
MAX_TAKES = 3

# KEYS: queue, entry, record, runs, thread-runs, run-threads. ARGV: limit, run id, request,
# record, created_at, thread id. The run's place, -1 when the queue is full, -2 for a run
# that exists already.
_PUSH = """
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then return -1 end
if redis.call('EXISTS', KEYS[3]) == 1 then return -2 end
redis.call('HSET', KEYS[2], 'request', ARGV[3], 'takes', 0)
redis.call('SET', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[2])
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[2])
redis.call('HSET', KEYS[6], ARGV[2], ARGV[6])
return redis.call('RPUSH', KEYS[1], ARGV[2])
"""

# Whether the run (KEYS[2] its record, KEYS[3] its owner) still waits: queued, no owner.
_WAITING = """
local function waiting(record, owner)
  if redis.call('EXISTS', owner) == 1 then return false end
  local old = redis.call('GET', record)
  return old ~= false and cjson.decode(old)['state'] == 'queued'
end
"""

# KEYS: entry, record, owner, owned, taken. ARGV: run id, instance, the running record.
_BEGIN = (
    _WAITING
    + """
redis.call('LREM', KEYS[5], 0, ARGV[1])
if not waiting(KEYS[2], KEYS[3]) then return 0 end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
"""
)

# The end of a waiting run, in the scripts below. KEYS: queue, record, owner, entry, events,
# seq. ARGV: run id, the finished record, maxlen, ts, the terminal event's data, ms to keep.
_END_WAITING = (
    _WAITING
    + """
local function finish()
  if not waiting(KEYS[2], KEYS[3]) then return 0 end
  redis.call('LREM', KEYS[1], 0, ARGV[1])
  redis.call('DEL', KEYS[4])
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[3], '1-0',
    't', ARGV[4], 'k', 'completion', 'd', ARGV[5])
  redis.call('SET', KEYS[6], 1)
  redis.call('SET', KEYS[2], ARGV[2])
  for i = 5, 6 do redis.call('PEXPIRE', KEYS[i], ARGV[6]) end
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return 1
end
"""
)

_END = _END_WAITING + "return finish()\n"

# KEYS as _END_WAITING's, then the lost taker's list. ARGV as _END_WAITING's, then MAX_TAKES.
# 1: queued again (at the front), 2: ended (taken too often), 0: nothing to do.
_REQUEUE = (
    _END_WAITING
    + """
if redis.call('LREM', KEYS[7], 0, ARGV[1]) == 0 then return 0 end
if not waiting(KEYS[2], KEYS[3]) then return 0 end
if redis.call('HINCRBY', KEYS[4], 'takes', 1) > tonumber(ARGV[7]) then
  return finish() * 2
end
redis.call('LPUSH', KEYS[1], ARGV[1])
return 1
"""
)


class RedisRunQueue:
    def __init__(self, link: RedisLink, membership: RedisMembership) -> None:
        self.link = link
        self.membership = membership
        self._scripts: dict[str, Any] = {}

    def _script(self, source: str) -> Any:
        """A script, registered with the client once (redis-py loads it again after a Redis
        restart)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.link.client().register_script(source)
        return script

    # --- keys -----------------------------------------------------------------------------

    def _entry_key(self, run_id: str) -> str:
        return f"{self.link.prefix}:{{{run_id}}}:queued"

    def _taken_key(self, instance: str) -> str:
        return self.link.key("queue-taken", instance)

    def _end_keys(self, run_id: str) -> list[str]:
        """What ending a waiting run touches (_END_WAITING's KEYS)."""
        events, seq, record, owner = self.link.run_keys(run_id)
        return [self.link.key("queue"), record, owner, self._entry_key(run_id), events, seq]

    # --- accepting --------------------------------------------------------------------------

    @reaching
    async def push(self, record: RunRecord, request: bytes, limit: int) -> int | None:
        link = self.link
        keys = [
            link.key("queue"),
            self._entry_key(record.id),
            link.run_keys(record.id)[2],
            link.key("runs"),
            link.key("thread-runs", record.thread_id),
            link.key("run-threads"),
        ]
        args = [limit, record.id, request, encode(record), record.created_at, record.thread_id]
        place = int(await self._script(_PUSH)(keys=keys, args=args))
        if place == -2:
            raise RunExists(record.id)
        return place if place > 0 else None

    @reading
    async def position(self, run_id: str) -> int | None:
        at = await self.link.client().lpos(self.link.key("queue"), run_id)
        return int(at) + 1 if at is not None else None

    # --- taking -----------------------------------------------------------------------------

    async def take(self, timeout_s: float) -> str | None:
        link = self.link
        client = link.client()
        # Before the take: a taker that dies holding an entry must be one the others look at.
        await client.sadd(link.key("queue-takers"), link.instance)
        taken = await client.blmove(
            link.key("queue"), self._taken_key(link.instance), timeout_s, "LEFT", "RIGHT"
        )
        return taken.decode() if taken is not None else None

    async def entry(self, run_id: str) -> tuple[RunRecord, bytes] | None:
        pipe = self.link.client().pipeline(transaction=False)
        pipe.get(self.link.run_keys(run_id)[2])
        pipe.hget(self._entry_key(run_id), "request")
        raw, request = await pipe.execute()
        if raw is None or request is None:
            await self.link.client().lrem(self._taken_key(self.link.instance), 0, run_id)
            return None
        return decode_record(raw), request

    async def begin(self, record: RunRecord) -> bool:
        link = self.link
        _, _, record_key, owner = link.run_keys(record.id)
        keys = [
            self._entry_key(record.id),
            record_key,
            owner,
            link.owned_key(link.instance),
            self._taken_key(link.instance),
        ]
        running = msgspec.structs.replace(record, state="running")
        args = [record.id, link.instance, encode(running)]
        return bool(await self._script(_BEGIN)(keys=keys, args=args))

    # --- ending a run that waits ----------------------------------------------------------

    async def _end_args(self, run_id: str, status: str, reason: str) -> list[Any] | None:
        raw = await self.link.client().get(self.link.run_keys(run_id)[2])
        if raw is None:
            return None
        record = decode_record(raw)
        now = time.time_ns()
        record.state, record.status = "finished", status
        record.finished_at, record.last_seq = now, 1
        data = encode({"status": status, "reason": reason})
        link = self.link
        return [run_id, encode(record), link.max_events, now, data, link.max_age_ms]

    @reaching
    async def end(self, run_id: str, status: str, reason: str) -> bool:
        args = await self._end_args(run_id, status, reason)
        if args is None:
            return False
        return bool(await self._script(_END)(keys=self._end_keys(run_id), args=args))

    async def fail_begun(self, run_id: str, reason: str) -> None:
        await self.membership.end_running(run_id, self.link.instance, "failed", reason)

    async def requeue_lost(self) -> list[str]:
        link = self.link
        client = link.client()
        takers = [m.decode() for m in await client.smembers(link.key("queue-takers"))]
        others = [t for t in takers if t != link.instance]
        if not others:
            return []
        mine, alive = await link.leases(others)
        if not mine:
            return []  # this instance's own lease lapsed: Redis (or this process) stalled
        requeued: list[str] = []
        for instance, live in zip(others, alive, strict=True):
            if live:
                continue
            taken = self._taken_key(instance)
            requeued += await self._requeue_all(taken)
            if not await client.llen(taken):
                await client.srem(link.key("queue-takers"), instance)
        return requeued

    async def requeue_own(self) -> list[str]:
        taken = self._taken_key(self.link.instance)
        return await self._requeue_all(taken)

    async def _requeue_all(self, taken: str) -> list[str]:
        """Every run of a taken list put back (or ended, taken too often); the ones queued
        again."""
        requeued: list[str] = []
        for member in await self.link.client().lrange(taken, 0, -1):
            run_id = member.decode()
            if await self._requeue(taken, run_id):
                requeued.append(run_id)
        return requeued

    async def _requeue(self, taken: str, run_id: str) -> bool:
        """Put back a run a lost taker held (``taken``: its list), or end it once taken too
        often; True if it waits again."""
        args = await self._end_args(run_id, "failed", "worker_lost")
        if args is None:
            await self.link.client().lrem(taken, 0, run_id)
            return False
        keys = [*self._end_keys(run_id), taken]
        return int(await self._script(_REQUEUE)(keys=keys, args=[*args, MAX_TAKES])) == 1
