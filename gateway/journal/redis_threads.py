"""Threads claimed across instances: a thread continued by a prompt takes one run at a time.

A start that needs its thread to itself (``StartRun.exclusive``) claims it with one script:
``SET … NX PX <lease>`` on ``<prefix>:thread-claim:<thread>``, whose value is the run. The
claim is renewed with the instance's lease (so a dead instance's lapses), released in the
commit of the run's end, and released by the survivor that ends the run of an instance found
dead. Renewal and release are compare-and-set on the run: a claim that lapsed and was taken
by another run is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from .base import RunRecord

log = logging.getLogger("loopgate.journal")

# KEYS: a thread's claim.  ARGV: the run taking it, the lease (ms). Nil once taken; else the
# run that holds it.
_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return redis.call('GET', KEYS[1])
"""

# KEYS: a thread's claim.  ARGV: the run that holds it, and the lease (ms) it is renewed for,
# or "" to release it. 1: done; 0: not that run's claim (any more).
KEEP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
"""


class ThreadClaims:
    """The threads this instance's runs hold (thread → run), and the scripts over them."""

    def __init__(self, key: Callable[[str], str], lease_ms: Callable[[], int]) -> None:
        self._key = key
        self._lease_ms = lease_ms
        self._held: dict[str, str] = {}
        self._claim: Any = None
        self._keep: Any = None

    def register(self, client: Any) -> None:
        self._claim = client.register_script(_CLAIM)
        self._keep = client.register_script(KEEP)

    async def take(self, thread_id: str, run_id: str) -> str | None:
        """The thread for the run; None once taken, else the run holding it."""
        holder = await self._claim(keys=[self._key(thread_id)], args=[run_id, self._lease_ms()])
        if holder is not None:
            return bytes(holder).decode()
        self._held[thread_id] = run_id
        return None

    async def renew(self, pipe: Any) -> list[tuple[str, str]]:
        """Queue the renewal of every claim held; returns them, in the order queued."""
        claims = list(self._held.items())
        for thread_id, run_id in claims:
            keys = [self._key(thread_id)]
            await self._keep(keys=keys, args=[run_id, self._lease_ms()], client=pipe)
        return claims

    def renewed(self, claims: list[tuple[str, str]], replies: Iterable[Any]) -> None:
        for (thread_id, run_id), held in zip(claims, replies, strict=True):
            if not held and self._held.get(thread_id) == run_id:
                # Lapsed (this instance stalled past its lease, or Redis lost it): the thread
                # may be another run's now; the look-up before each start still sees this one.
                log.warning("run %s: its claim on thread %s lapsed", run_id, thread_id)
                del self._held[thread_id]

    def holds_for(self, record: RunRecord) -> bool:
        """The record is a finished run whose thread this instance holds for it (to free)."""
        return record.state == "finished" and self._held.get(record.thread_id) == record.id

    def release_in(self, pipe: Any, record: RunRecord) -> None:
        """Queue the release of a finished run's claim, in the commit of its end (by sha: a
        lost script fails the commit, which loads it and is retried)."""
        if self.holds_for(record):
            pipe.evalsha(self._keep.sha, 1, self._key(record.thread_id), record.id, "")

    def committed(self, records: Iterable[RunRecord]) -> None:
        """These records are committed: the claims of the finished ones are released."""
        for record in records:
            if self.holds_for(record):
                del self._held[record.thread_id]

    async def adopt(self, client: Any, thread_id: str, run_id: str) -> None:
        """A run taken over from a lost instance keeps its thread: a claim its old owner held
        for it is renewed here from now on (none, or another run's: nothing to keep)."""
        holder = await client.get(self._key(thread_id))
        if holder is not None and bytes(holder).decode() == run_id:
            self._held[thread_id] = run_id

    def forget(self, run_id: str) -> None:
        """Another instance ended the run (and freed its thread)."""
        self._held = {t: r for t, r in self._held.items() if r != run_id}

    async def release(self, thread_id: str, run_id: str) -> None:
        """Free a thread held by a run that has ended (a survivor ended a dead owner's)."""
        await self._keep(keys=[self._key(thread_id)], args=[run_id, ""])
