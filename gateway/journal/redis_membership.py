"""This instance among the gateway instances that share a Redis journal (the journal's
``cluster``, gateway.journal.base.Cluster; docs/scale.md).

The instance that starts a run owns it: it runs the producer, and only it appends (other
instances forward commands and pushes to it, over pub/sub with a reply list). Its lease is one
key per instance (``SET … PX``, renewed by a heartbeat); a run whose owner's lease is gone is
ended by the first survivor that sees it (``END_ORPHAN``: a compare-and-set on the run's last
seq and state, so two survivors cannot both end it) with one terminal
``completion{failed, reason: owner_lost}``. Threads a run takes to itself are claimed with the
lease (gateway.journal.redis_threads), and the runs of other instances read here are followed
as their owners commit (gateway.journal.redis_follow).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import suppress
from functools import partial
from typing import Any

import anyio
import msgspec
from anyio.abc import TaskGroup
from redis.exceptions import RedisError

from . import redis_threads
from .base import (
    Adopter,
    CommandHandler,
    Deliver,
    EndedListener,
    LostListener,
    RunRecord,
    SharedRunQueue,
)
from .redis_entries import decode_record, encode, sized_from_entry
from .redis_follow import StreamFollower
from .redis_lease import LeaseJudge
from .redis_link import (
    COMMAND_TIMEOUT_S,
    FULL,
    RedisLink,
    reaching,
    reading,
    trouble,
)
from .redis_queue import RedisRunQueue
from .redis_takeover import RELEASED, STILL_RUNNING, RedisTakeover, Taken
from .redis_threads import ThreadClaims

log = logging.getLogger("loopgate.journal")

RETRY_MIN_S = 0.05
RETRY_MAX_S = 1.0
COMMAND_RETRY_S = 0.05
REPLY_TTL_S = 30
SCAN_COUNT = 500
# Tries at ending a run another instance keeps appending to (a cancel it did not answer).
END_TRIES = 5

# KEYS: events, seq, record, owner.  ARGV: the owner it must still have, the last seq seen,
# maxlen, ts, kind, data, the finished record, ms to keep it, and the terminal event's seq (the
# last seen + 1, or past it: after seqs Redis lost, past what clients were shown). 1: ended
# here; 0: not (any more) to end — finished meanwhile, or another owner; 2: events appended
# since (its owner lives after all, or will be looked at again).
_END_RUNNING = (
    STILL_RUNNING
    + """
local seq = tonumber(ARGV[9])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], seq .. '-0',
  't', ARGV[4], 'k', ARGV[5], 'd', ARGV[6])
redis.call('SET', KEYS[2], seq)
redis.call('SET', KEYS[3], ARGV[7])
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[8]) end
return 1
"""
)


class RedisMembership:
    def __init__(self, link: RedisLink, commit_trouble: Callable[[], str | None]) -> None:
        self.link = link
        self.on_command: CommandHandler | None = None
        self.on_lost: LostListener | None = None
        self.on_ended: EndedListener | None = None
        # Why the lease's renewal fails right now (readiness: /readyz), beside the storage's
        # own commits' (``commit_trouble``).
        self.lease_trouble: str | None = None
        self._commit_trouble = commit_trouble
        self.follower = StreamFollower(
            link.key("wake", link.instance), 3 * link.lease_ms(), sized_from_entry
        )
        self.threads = ThreadClaims(partial(link.key, "thread-claim"), link.lease_ms)
        self.adopter: Adopter | None = None
        self.takeover = RedisTakeover(link, self.threads, lambda: self.adopter)
        self._end_running_script: Any = None
        self.judge = LeaseJudge(link.lease_s)
        # Set when another instance hands runs over: the reaper looks at once.
        self.reap_now = anyio.Event()
        self._resubscribe_delay = RETRY_MIN_S
        self.run_queue: SharedRunQueue | None = RedisRunQueue(link, self)

    @property
    def full(self) -> bool:
        """Redis refuses what this instance writes for want of memory: its commits, or (an
        instance with none under way finds out so) its lease's renewal."""
        return FULL in (self._commit_trouble(), self.lease_trouble)

    # --- joining and leaving --------------------------------------------------------------

    async def join(self) -> None:
        """Take this instance's lease (the link is open). Nothing to recover: a run a dead
        instance left open is ended by whichever instance finds its lease gone first (the
        reaper), this one included."""
        client = self.link.client()
        self._end_running_script = client.register_script(_END_RUNNING)
        self.threads.register(client)
        self.takeover.register(client)
        await self._renew()

    async def load_scripts(self) -> None:
        """The scripts the storage's commits call by their sha (a Redis restarted, or
        flushed, lost them)."""
        await self.link.client().script_load(redis_threads.KEEP)

    async def serve(self) -> None:
        """Forever: the lease, the reaper, the commands sent here, and the views followed."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat)
            tg.start_soon(self._reaper)
            tg.start_soon(self._serve_commands)
            tg.start_soon(self.follower.run, self.link.reader)

    async def leave(self) -> None:
        """Give up the lease at once (survivors end this instance's runs left open without
        waiting for it to lapse); the link stays open."""
        link = self.link
        with anyio.move_on_after(2), suppress(RedisError):
            await link.client().delete(
                link.lease_key(link.instance), link.key("wake", link.instance)
            )

    # --- ownership, in the storage's commits ------------------------------------------------

    def commit_ownership(self, pipe: Any, record: RunRecord) -> None:
        """Queue, in the commit of a run's record, that this instance owns it while it runs;
        a finished run's thread is free for its next run once its end is committed."""
        owned = self.link.owned_key(self.link.instance)
        if record.state == "running":
            pipe.sadd(owned, record.id)
        else:
            pipe.srem(owned, record.id)
            self.threads.release_in(pipe, record)

    def committed(self, records: Iterable[RunRecord], lost: list[str]) -> None:
        """A commit landed with these records; the runs ``lost`` were refused (another
        instance appended to them: their view here is stale)."""
        self.threads.committed(records)
        owned = self.judge.owned
        for record in records:
            if record.state == "running":
                owned.add(record.id)
            else:
                owned.discard(record.id)
        for run_id in lost:
            owned.discard(run_id)
            self.threads.forget(run_id)
            if self.on_lost is not None:
                self.on_lost(run_id)

    # --- claims -----------------------------------------------------------------------------

    @reaching
    async def claim(self, run_id: str) -> bool:
        """Take a new run's id for this instance; False if another instance took it first (a
        client-chosen id started on two instances at once is started once)."""
        link = self.link
        claimed = await link.client().set(
            link.claim_key(run_id), link.instance, nx=True, px=link.max_age_ms
        )
        return bool(claimed)

    @reaching
    async def claim_thread(self, thread_id: str, run_id: str) -> str | None:
        """Take a thread for a run of this instance until it ends (a continued thread takes
        one run at a time); None once taken, else the run holding it. The claim lasts a lease
        and is renewed with this instance's: a dead instance's lapses."""
        return await self.threads.take(thread_id, run_id)

    # --- views of other instances' runs ---------------------------------------------------

    @reaching
    async def watch(
        self, run_id: str, after: int, deliver: Deliver, failed: Callable[[], None]
    ) -> None:
        """Deliver the run's events after seq ``after`` as its owner commits them, until
        ``unwatch`` or ``failed`` (one blocking read for every run followed:
        gateway.journal.redis_follow)."""
        key = self.link.run_keys(run_id)[0]
        await self.follower.watch(self.link.client(), run_id, key, after, deliver, failed)

    def unwatch(self, run_id: str) -> None:
        self.follower.unwatch(run_id)

    # --- takeover (gateway.journal.redis_takeover) -----------------------------------------

    async def others_alive(self) -> bool:
        return await self.takeover.others_alive()

    async def release(self, run_ids: list[str]) -> None:
        await self.takeover.release(run_ids)

    async def take_released(self) -> None:
        """Take over the runs other instances handed over as they shut down."""
        for run_id in await self.takeover.released():
            owner = await self.owner(run_id)
            if owner == self.link.instance:
                continue  # handed over by this instance: for the others
            taken = "ended" if owner is None else await self._take(run_id, owner)
            if taken == "refused" and owner is not None:
                await self._end_lost(run_id, owner)
            if taken not in ("busy", "left"):
                await self.takeover.settled(run_id)

    async def _take(self, run_id: str, owner: str) -> Taken:
        taken = await self.takeover.take(run_id, owner)
        if taken == "failed":
            await self._end_lost(run_id, self.link.instance)
        return taken

    async def _end_lost(self, run_id: str, owner: str) -> bool:
        """End ``owner``'s run ``owner_lost``; True if ended here."""
        return await self.end_running(run_id, owner, "failed", "owner_lost") == 1

    # --- leases and lost instances --------------------------------------------------------

    async def _renew(self) -> None:
        """This instance's lease, and its place in the directory of instances (which the
        reapers read: only the runs of instances whose lease is gone are looked at)."""
        link = self.link
        started = anyio.current_time()
        pipe = link.client().pipeline(transaction=False)
        pipe.set(link.lease_key(link.instance), b"1", px=link.lease_ms(), get=True)
        pipe.zadd(link.key("instances"), {link.instance: time.time_ns() // 1_000_000})
        claims = await self.threads.renew(pipe)
        had, _, *kept = await pipe.execute()
        self.threads.renewed(claims, kept)
        if self.judge.renewed(started, had is not None):
            await self._look_at_owned()

    async def _look_at_owned(self) -> None:
        """This instance's lease had lapsed: a survivor may have ended runs it owns. Those
        end here now (their clients rejoin the journal's end), not at their next commit."""
        link = self.link
        owned = list(self.judge.owned)
        if not owned or self.on_lost is None:
            return
        raws = await link.client().mget([link.run_keys(run_id)[2] for run_id in owned])
        for run_id, raw in zip(owned, raws, strict=True):
            if raw is not None and decode_record(raw).state != "running":
                log.warning(
                    "run %s: ended by another instance while this one's lease lapsed", run_id
                )
                self.judge.owned.discard(run_id)
                self.threads.forget(run_id)
                self.on_lost(run_id)

    async def _heartbeat(self) -> None:
        while True:
            await anyio.sleep(self.link.lease_s / 3)
            try:
                await self._renew()
            except (RedisError, OSError) as exc:
                if self.lease_trouble is None:
                    log.exception("journal: renewing this instance's lease failed; retrying")
                self.lease_trouble = trouble(exc)
            else:
                self.lease_trouble = None

    async def reaper_pause(self) -> None:
        """Until the next sweep: half a lease, or less when runs are handed over."""
        with anyio.move_on_after(self.link.lease_s / 2):
            await self.reap_now.wait()
        self.reap_now = anyio.Event()

    async def _reaper(self) -> None:
        while True:
            await self.reaper_pause()
            try:
                await self.end_orphans()
            except (RedisError, OSError):
                log.exception("journal: looking for runs of lost instances failed; retrying")

    async def end_orphans(self) -> list[str]:
        """End the running runs of instances whose lease is gone; returns the ones ended here.

        It reads the directory of instances and their leases, then only the runs a lost one
        owned: a sweep where no instance was lost costs one read per instance, however many
        runs are running. A lost instance leaves the directory once its runs are ended."""
        link = self.link
        client = link.client()
        await self.take_released()
        others = [
            m.decode()
            for m in await client.zrange(link.key("instances"), 0, -1)
            if m.decode() != link.instance
        ]
        if not others:
            return []
        started = anyio.current_time()
        mine, alive = await link.leases(others)
        if not mine:
            self.judge.hold()  # ours lapsed too: Redis (or this instance) stalled
        self.judge.timed(started)
        if not self.judge.may_judge:
            return []
        ended: list[str] = []
        for instance, live in zip(others, alive, strict=True):
            if live:
                continue
            owned = link.owned_key(instance)
            cursor = 0
            while True:
                cursor, members = await client.sscan(owned, cursor, count=SCAN_COUNT)
                for member in members:
                    if await self._end_orphan(member.decode(), instance):
                        ended.append(member.decode())
                if cursor == 0:
                    break
            if not await client.scard(owned):
                await client.zrem(link.key("instances"), instance)
        return ended

    async def _end_orphan(self, run_id: str, owner: str) -> bool:
        taken = await self._take(run_id, owner)
        if taken in ("taken", "failed", "ended"):
            # No longer that instance's: resumed here, or ended (here or elsewhere).
            await self.link.client().srem(self.link.owned_key(owner), run_id)
            return False
        if taken in ("busy", "left"):
            return False
        ended = await self.end_running(run_id, owner, "failed", "owner_lost")
        if ended == 1:
            log.warning("run %s: its instance %s is gone; ended it (owner_lost)", run_id, owner)
        if ended != 2:
            # Ended, here or by another survivor, or not that instance's: no longer its.
            await self.link.client().srem(self.link.owned_key(owner), run_id)
        return ended == 1

    async def end_running(
        self, run_id: str, owner: str, status: str, reason: str, shown: int = 0
    ) -> int:
        """End a run still ``running`` under ``owner`` with one terminal ``completion``,
        committed as a compare-and-set on its owner, last seq and state (``_END_RUNNING``):
        1 ended here, 0 not running (or not that owner's) any more, 2 appended to meanwhile.
        The terminal event comes after ``shown`` too: the last seq clients may have been shown,
        when Redis lost some of it (its stream diverged from what its owner committed)."""
        link = self.link
        client = link.client()
        keys = link.run_keys(run_id)
        raw_last, raw_record = await client.mget(keys[1], keys[2])
        if raw_record is None:
            return 0
        record = decode_record(raw_record)
        if record.state != "running":
            return 0
        last = int(raw_last or 0)
        now = time.time_ns()
        record.state = "finished"
        record.status = status
        record.finished_at = now
        record.last_seq = max(last, shown) + 1
        data = encode({"status": status, "reason": reason})
        args = [owner, last, link.max_events, now, "completion", data, encode(record)]
        args += [link.max_age_ms, record.last_seq]
        done = int(await self._end_running_script(keys=keys, args=args))
        if done == 1:
            # Its thread is free for the next run (else once its owner's claim lapses).
            await self.threads.release(record.thread_id, run_id)
            if self.on_ended is not None:
                self.on_ended(run_id, reason)  # the compare-and-set chose this instance
        return done

    # --- commands to the owners of runs -----------------------------------------------------

    @reading
    async def owner(self, run_id: str) -> str | None:
        raw = await self.link.client().get(self.link.run_keys(run_id)[3])
        return raw.decode() if raw is not None else None

    @reaching
    async def command(self, run_id: str, command: dict[str, Any]) -> dict[str, Any] | None:
        """Send a command to the instance that owns the run; its answer, or None when no
        instance owning it answered (gone, or the run finished and its owner let it go)."""
        link = self.link
        owner = await self.owner(run_id)
        if owner is None or owner == link.instance:
            return None
        reply = link.key("reply", uuid.uuid4().hex)
        payload = encode({**command, "run_id": run_id, "reply": reply})
        client = link.client()
        deadline = anyio.current_time() + COMMAND_TIMEOUT_S
        while not await client.publish(link.key("commands", owner), payload):
            # Nobody listens: the owner is gone (so is its lease), or it is subscribing again
            # after a lost connection (a Redis restart), which takes it a moment.
            if anyio.current_time() > deadline or not await client.exists(link.lease_key(owner)):
                return None
            await anyio.sleep(COMMAND_RETRY_S)
        answer = await client.blpop([reply], timeout=COMMAND_TIMEOUT_S)
        if answer is None:
            return None
        decoded = msgspec.json.decode(answer[1], type=dict[str, Any])
        return None if decoded.get("missing") else decoded

    @reaching
    async def end_unanswered(self, run_id: str) -> bool:
        # Appended to meanwhile: its owner still produces (and hears nothing); the end goes
        # after what it appended, and its next commit is refused.
        for _ in range(END_TRIES):
            owner = await self.owner(run_id)
            if owner is None:
                return False
            ended = await self.end_running(run_id, owner, "cancelled", "owner_unreachable")
            if ended != 2:
                if ended == 1:
                    log.warning(
                        "run %s: its instance %s did not answer a cancel; ended it here",
                        run_id,
                        owner,
                    )
                return ended == 1
        return False

    async def _serve_commands(self) -> None:
        """Commands other instances send to runs owned here, each answered on its own list.
        A lost connection (Redis restarted) is subscribed again; what was published
        meanwhile is gone (pub/sub keeps nothing), and its senders hear no answer."""
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    await self._subscribed(tg)
                except (RedisError, OSError):
                    log.exception("journal: the command channel was lost; subscribing again")
                    await anyio.sleep(self._resubscribe_delay)
                    self._resubscribe_delay = min(self._resubscribe_delay * 2, RETRY_MAX_S)

    async def _subscribed(self, tg: TaskGroup) -> None:
        pubsub = self.link.client().pubsub()
        try:
            await pubsub.subscribe(self.link.key("commands", self.link.instance))
            self._resubscribe_delay = RETRY_MIN_S
            pinged = anyio.current_time()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None and message["type"] == "message":
                    tg.start_soon(self._answer, message["data"])
                if anyio.current_time() - pinged >= self.link.lease_s / 3:
                    # A listener only reads: a connection whose Redis restarted out of its
                    # sight (no FIN across a network) would be waited on for good, and every
                    # command to this instance go unanswered. Written to, it fails at once.
                    await pubsub.ping()
                    pinged = anyio.current_time()
        finally:
            with anyio.CancelScope(shield=True), suppress(RedisError, OSError):
                await pubsub.aclose()

    async def _answer(self, raw: bytes) -> None:
        if raw == RELEASED:
            self.reap_now.set()
            return
        try:
            command = msgspec.json.decode(raw, type=dict[str, Any])
            reply = str(command["reply"])
        except (msgspec.DecodeError, KeyError):
            log.warning("journal: an unreadable command was ignored")
            return
        answer: dict[str, Any] | None = None
        if self.on_command is not None:
            try:
                answer = await self.on_command(command)
            except Exception:
                log.exception("journal: command %s failed", command.get("verb"))
                answer = {"error": "the run's owner could not apply the command"}
        payload = encode(answer if answer is not None else {"missing": True})
        pipe = self.link.client().pipeline(transaction=False)
        pipe.rpush(reply, payload)
        pipe.expire(reply, REPLY_TTL_S)
        try:
            await pipe.execute()
        except (RedisError, OSError):
            # Applied, but not answered: its sender hears nothing and says so to its client.
            log.warning("journal: the answer to command %s was lost", command.get("verb"))
