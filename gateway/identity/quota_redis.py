"""Quota counters in the Redis the journal shares (docs/auth.md#quotas): every instance counts
against the same numbers.

Per party (a principal, or a whole tenant), keys under the journal's prefix, all of one tenant
in one hash slot (``{tenant}``: a script's keys are in one Cluster slot):

- ``…:active``: the slots of runs going now, a sorted set of hold ids scored by when each lease
  runs out. The instance holding a run renews its leases every third of the journal's lease
  (``lease=`` in its URL, 10 s by default); an instance that dies stops renewing, and its
  slots are free one lease after its last renewal.
- ``…:starts``: the starts of the last minute, scored by when (a sliding window).
- ``…:day:YYYY-MM-DD``: a hash of the UTC day's ``events`` and ``tokens``, kept two days.

A start's check and take is one Lua script (nothing can slip between the check and the take,
whichever instances race). Ends and spending are queued and sent by a background task (the
hub's hot path never waits for Redis); a start sends what is queued first, so a run that ended
here is never counted against the next start here. Redis out of reach or slower than the
journal's command timeout: a start is refused with Unavailable (503), never let through.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from urllib.parse import quote

import anyio
from redis.exceptions import RedisError

from ...contracts.ports import Unavailable
from ..journal.redis_link import COMMAND_TIMEOUT_S, RedisLink

# Relative: this module and quotas.py meet each other's classes under one name however either
# was imported (a checker reading the file at its own path, or as loopgate.…).
from .quotas import (
    CONCURRENT_RETRY_S,
    DAY_S,
    QUOTAS,
    WINDOW_S,
    Hold,
    Party,
    Refusal,
    until_tomorrow,
    utc_day,
)

log = logging.getLogger("loopgate.quotas")

UNAVAILABLE = "the quota counters (Redis) do not answer; retry shortly"
# Day counters outlive their day by one: a start just past midnight on a slow clock still
# finds yesterday's.
DAY_TTL_S = 2 * DAY_S
RETRY_S = 1.0
# Ends and spending waiting for Redis, at most: beyond, the oldest are dropped (a slot then
# comes back when its lease runs out; spending is lost), said in the log.
MAX_QUEUED = 100_000

# KEYS: per party (the principal, then its tenant): active, starts, day.  ARGV: now (ms), the
# lease (ms), the hold's id, then per party its four limits (0: none), in QUOTAS order.
# Returns {-1} when admitted (a slot and a start taken where limited), else {party (0, 1),
# quota (1-4), ms until a start leaves the window (runs_per_minute)}.
_ADMIT = """
local now, lease, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for p = 0, 1 do
  local k, a = p * 3, 4 + p * 4
  local concurrent, per_minute = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local events, tokens = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  if concurrent > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 1], '-inf', now)
    if redis.call('ZCARD', KEYS[k + 1]) >= concurrent then return {p, 1, 0} end
  end
  if per_minute > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 2], '-inf', now - tonumber(ARGV[12]))
    if redis.call('ZCARD', KEYS[k + 2]) >= per_minute then
      local oldest = redis.call('ZRANGE', KEYS[k + 2], 0, 0, 'WITHSCORES')
      return {p, 2, tonumber(oldest[2]) + tonumber(ARGV[12]) - now}
    end
  end
  if events > 0 and tonumber(redis.call('HGET', KEYS[k + 3], 'events') or '0') >= events then
    return {p, 3, 0}
  end
  if tokens > 0 and tonumber(redis.call('HGET', KEYS[k + 3], 'tokens') or '0') >= tokens then
    return {p, 4, 0}
  end
end
for p = 0, 1 do
  local k, a = p * 3, 4 + p * 4
  if tonumber(ARGV[a]) > 0 then
    redis.call('ZADD', KEYS[k + 1], now + lease, id)
    redis.call('PEXPIRE', KEYS[k + 1], 2 * lease)
  end
  if tonumber(ARGV[a + 1]) > 0 then
    redis.call('ZADD', KEYS[k + 2], now, id)
    redis.call('PEXPIRE', KEYS[k + 2], tonumber(ARGV[12]))
  end
end
return {-1}
"""


class RedisLedger:
    """Quota counters every instance on the journal's Redis shares."""

    def __init__(
        self,
        link: RedisLink,
        *,
        timeout_s: float = COMMAND_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.link = link
        self.timeout_s = timeout_s
        self.clock = clock
        self.lease_ms = link.lease_ms()
        self._script: Any = None
        # Holds of runs going here: their slots' leases are renewed until they end.
        self._held: dict[str, Hold] = {}
        # Commands queued for the next send: (command, args) in order.
        self._queued: list[tuple[str, tuple[Any, ...]]] = []
        self._queued_now = anyio.Event()
        self._sending = anyio.Lock()

    # --- keys -----------------------------------------------------------------------------

    def _base(self, party: Party) -> str:
        # quote(): a ':' or brace in a name cannot make two parties' keys the same.
        tenant = quote(party.tenant, safe="")
        who = "t" if party.subject is None else "p:" + quote(party.subject, safe="")
        return f"{self.link.prefix}:quota:{{{tenant}}}:{who}"

    def keys_of(self, party: Party, day: str) -> tuple[str, str, str]:
        base = self._base(party)
        return f"{base}:active", f"{base}:starts", f"{base}:day:{day}"

    # --- the ledger -----------------------------------------------------------------------

    async def admit(self, hold: Hold) -> Refusal | None:
        now = self.clock()
        day = utc_day(now)
        keys: list[str] = []
        limits: list[int] = []
        for party in hold.parties:
            keys += self.keys_of(party, day)
            limits += [party.limits.of(name) for name in QUOTAS]
        args = [int(now * 1000), self.lease_ms, hold.id, *limits, int(WINDOW_S * 1000)]
        async with self._reaching():
            # What ended here goes first: its slot is free for this start.
            await self._send()
            if self._script is None:
                self._script = self.link.client().register_script(_ADMIT)
            answer = await self._script(keys=keys, args=args)
        party_index = int(answer[0])
        if party_index < 0:
            hold.started_at = now
            if hold.principal.limits.concurrent_runs or hold.tenant.limits.concurrent_runs:
                self._held[hold.id] = hold
            return None
        party = hold.parties[party_index]
        quota = QUOTAS[int(answer[1]) - 1]
        if quota == "concurrent_runs":
            retry = CONCURRENT_RETRY_S
        elif quota == "runs_per_minute":
            retry = max(-(-int(answer[2]) // 1000), 1)
        else:
            retry = until_tomorrow(now)
        return Refusal(party, quota, retry)

    async def refund(self, hold: Hold) -> None:
        self._held.pop(hold.id, None)
        hold.released = True
        day = utc_day(hold.started_at)
        pipe = self.link.client().pipeline(transaction=False)
        for party in hold.parties:
            active, starts, _ = self.keys_of(party, day)
            pipe.zrem(active, hold.id)
            pipe.zrem(starts, hold.id)
        try:
            async with self._reaching():
                await pipe.execute()
        except Unavailable:
            # Its slot's lease is not renewed: it comes back in a lease.
            log.warning("quotas: a refused start's slot could not be given back at once")

    def release(self, hold: Hold) -> None:
        if hold.released:
            return
        hold.released = True
        self._held.pop(hold.id, None)
        for party in hold.parties:
            if party.limits.concurrent_runs:
                self._queue("zrem", self._base(party) + ":active", hold.id)

    def spend(self, hold: Hold, events: int, tokens: int) -> None:
        day = utc_day(self.clock())
        for party in hold.parties:
            if party.limits.daily:
                key = self.keys_of(party, day)[2]
                if events:
                    self._queue("hincrby", key, "events", events)
                if tokens:
                    self._queue("hincrby", key, "tokens", tokens)
                self._queue("expire", key, DAY_TTL_S)

    async def serve(self) -> None:
        """Send what is queued as it comes, and renew the leases of the slots held here."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._renewing)
                while True:
                    await self._queued_now.wait()
                    self._queued_now = anyio.Event()
                    try:
                        async with self._reaching():
                            await self._send()
                    except Unavailable:
                        log.warning("quotas: Redis does not answer; sending the counts again")
                        await anyio.sleep(RETRY_S)
                        self._queued_now.set()
        finally:
            # The hub stops: the ends of the runs its drain ended go out now, if they can
            # (else their slots come back when their leases run out).
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                try:
                    await self._send()
                except Exception:
                    log.warning("quotas: the last counts could not be sent to Redis")

    # --- helpers --------------------------------------------------------------------------

    def _queue(self, command: str, *args: Any) -> None:
        self._queued.append((command, args))
        if len(self._queued) > MAX_QUEUED:
            del self._queued[: len(self._queued) - MAX_QUEUED]
            log.warning("quotas: Redis has been away long; the oldest counts are dropped")
        self._queued_now.set()

    async def _send(self) -> None:
        """Send what is queued, in one pipeline; on failure it stays queued, first."""
        async with self._sending:
            batch, self._queued = self._queued, []
            if not batch:
                return
            try:
                pipe = self.link.client().pipeline(transaction=False)
                for command, args in batch:
                    getattr(pipe, command)(*args)
                await pipe.execute()
            except BaseException:
                self._queued[:0] = batch
                raise

    async def _renewing(self) -> None:
        while True:
            await anyio.sleep(self.lease_ms / 3000)
            if not self._held:
                continue
            try:
                async with self._reaching():
                    await self._renew()
            except Unavailable:
                log.warning("quotas: the leases of runs going here could not be renewed")

    async def _renew(self) -> None:
        until = int(self.clock() * 1000) + self.lease_ms
        pipe = self.link.client().pipeline(transaction=False)
        for hold in list(self._held.values()):
            for party in hold.parties:
                if party.limits.concurrent_runs:
                    active = self._base(party) + ":active"
                    # xx: a slot released meanwhile is not taken again.
                    pipe.zadd(active, {hold.id: until}, xx=True)
                    pipe.pexpire(active, 2 * self.lease_ms)
        await pipe.execute()

    def _reaching(self) -> AbstractAsyncContextManager[None]:
        return reaching(self.timeout_s)


@asynccontextmanager
async def reaching(timeout_s: float) -> AsyncIterator[None]:
    """Redis within ``timeout_s``, or Unavailable: a start waits no longer, and never passes
    unchecked (fail closed)."""
    try:
        with anyio.fail_after(timeout_s):
            yield
    except TimeoutError:
        log.warning("quotas: Redis did not answer in %.1f s", timeout_s)
        raise Unavailable(UNAVAILABLE, retry_after=1) from None
    except (RedisError, OSError) as exc:
        log.warning("quotas: Redis did not answer (%s)", type(exc).__name__)
        raise Unavailable(UNAVAILABLE, retry_after=1) from None
