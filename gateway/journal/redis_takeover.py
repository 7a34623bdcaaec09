"""Takeover: a lost instance's resumable run is run again by one survivor (docs/scale.md,
"Takeover after a crash").

Where the reaper would end a run ``owner_lost``, it first asks the hub's adopter
(gateway.hub.takeover) whether this instance resumes it. If so, ownership moves with one
compare-and-set on the run's owner, last seq and state (``_TAKE``, as the reaper's end is):
of two survivors only one takes the run, and an old owner that comes back finds its next
commit refused (its seq is taken) and lets the run go. The record carries the new ``attempt``.

Runs an instance hands over as it shuts down (``release``) are in one set every reaper reads
first: they are taken at once, without waiting for the leaver's lease to lapse.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Literal

import anyio
from redis.exceptions import RedisError

from .base import Adopter, RunRecord, Verdict
from .redis_entries import decode_record, encode
from .redis_link import RedisLink
from .redis_threads import ThreadClaims

log = logging.getLogger("loopgate.journal")

# taken: resumed here; ended: not running (or not that owner's) any more; busy: appended to
# meanwhile (its owner lives after all); refused: to be ended owner_lost; left: for another
# instance to resume; failed: taken, but it could not be started here (the caller ends it, now
# this instance's).
Taken = Literal["taken", "ended", "busy", "refused", "left", "failed"]

# The start of a compare-and-set on a running run (this one's, and the reaper's end's). KEYS:
# events, seq, record, owner. ARGV[1]: the owner it must still have, ARGV[2]: the last seq
# seen. 0: not running, or not that owner's (any more); 2: appended to since.
STILL_RUNNING = """
if redis.call('GET', KEYS[4]) ~= ARGV[1] then return 0 end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last ~= tonumber(ARGV[2]) then return 2 end
local old = redis.call('GET', KEYS[3])
if not old or cjson.decode(old)['state'] ~= 'running' then return 0 end
"""

# KEYS: events, seq, record, owner.  ARGV: the owner it must still have, the last seq seen,
# the new record, the new owner. 1: taken; 0: not running or not that owner's; 2: appended to.
_TAKE = (
    STILL_RUNNING
    + """
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], ARGV[4])
return 1
"""
)

ASK_TIMEOUT_S = 2.0
# Published to each other instance's command channel with a release: its reaper looks now.
RELEASED = b'{"verb":"released"}'

_OUTCOMES: dict[int, Taken] = {0: "ended", 1: "taken", 2: "busy"}


class RedisTakeover:
    def __init__(
        self, link: RedisLink, threads: ThreadClaims, adopter: Callable[[], Adopter | None]
    ) -> None:
        self.link = link
        self.threads = threads
        # The cluster's (the hub sets it there).
        self._adopter = adopter
        self._script: Any = None

    def register(self, client: Any) -> None:
        self._script = client.register_script(_TAKE)

    @property
    def released_key(self) -> str:
        return self.link.key("released")

    def verdict(self, record: RunRecord) -> Verdict:
        adopter = self._adopter()
        return "end" if adopter is None else adopter.judge(record)

    async def take(self, run_id: str, owner: str) -> Taken:
        """Resume ``owner``'s run here if this instance wants it."""
        link = self.link
        client = link.client()
        keys = link.run_keys(run_id)
        raw_last, raw_record = await client.mget(keys[1], keys[2])
        if raw_record is None:
            return "ended"
        record = decode_record(raw_record)
        if record.state != "running":
            return "ended"
        verdict = self.verdict(record)
        if verdict != "resume":
            return "left" if verdict == "leave" else "refused"
        last = int(raw_last or 0)
        record.attempt += 1
        record.last_seq = last
        mine = link.owned_key(link.instance)
        # In this instance's set before it owns the run: should it die right after the
        # compare-and-set, the run is where the next survivor's reaper looks.
        await client.sadd(mine, run_id)
        args = [owner, last, encode(record), link.instance]
        done = _OUTCOMES[int(await self._script(keys=keys, args=args))]
        if done != "taken":
            await client.srem(mine, run_id)
            return done
        return await self.start(record, owner)

    async def start(self, record: RunRecord, owner: str) -> Taken:
        """The run is this instance's now (``record``: as the takeover committed it): resume
        it; "failed" when it cannot be (the caller ends it)."""
        run_id = record.id
        log.warning(
            "run %s: its instance %s is gone; resuming it here (attempt %d)",
            run_id,
            owner,
            record.attempt,
        )
        adopter = self._adopter()
        assert adopter is not None
        try:
            with suppress(RedisError, OSError):
                await self.threads.adopt(self.link.client(), record.thread_id, run_id)
            await adopter.resume(record)
        except Exception:
            log.exception("run %s: resuming it here failed", run_id)
            return "failed"
        return "taken"

    async def release(self, run_ids: list[str]) -> None:
        """Hand the runs over, and wake the other instances' reapers to take them now."""
        link = self.link
        client = link.client()
        try:
            await client.sadd(self.released_key, *run_ids)
            for instance in await self._others():
                await client.publish(link.key("commands", instance), RELEASED)
        except (RedisError, OSError):
            # Their owner's lease lapses as it exits: they are taken over then.
            log.warning("journal: %d run(s) could not be handed over at once", len(run_ids))

    async def released(self) -> list[str]:
        return [m.decode() for m in await self.link.client().smembers(self.released_key)]

    async def settled(self, run_id: str) -> None:
        """A released run was taken, or needs no taking any more."""
        await self.link.client().srem(self.released_key, run_id)

    async def _others(self) -> list[str]:
        link = self.link
        members = await link.client().zrange(link.key("instances"), 0, -1)
        return [m.decode() for m in members if m.decode() != link.instance]

    async def others_alive(self) -> bool:
        # Asked on the way out: a Redis out of reach is no one to hand runs to, not a hang.
        with anyio.move_on_after(ASK_TIMEOUT_S), suppress(RedisError, OSError):
            link = self.link
            pipe = link.client().pipeline(transaction=False)
            for instance in await self._others():
                pipe.exists(link.lease_key(instance))
            return any(await pipe.execute())
        return False
