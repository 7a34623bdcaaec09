"""Redis journal: several gateway processes share runs through Redis Streams (docs/scale.md).

Each run's events are a Redis Stream whose entry ids are ``<seq>-0``: the gateway's seq *is*
the stream position, so a resume cursor means the same thing on every instance, and an
append of a seq that is already there fails in Redis itself. Appends go through one Lua
script per run and commit (``APPEND``): it checks that the batch starts right after the last
seq, appends, and stores the run's record — all or nothing, so no seq is ever doubled or
skipped, whichever instances race. Keys of one run share a hash tag (``{run id}``): the
script touches one Cluster slot.

The instance that starts a run owns it: it runs the producer, and only it appends (other
instances forward commands and pushes to it, over pub/sub with a reply list). Its lease is one
key per instance (``SET … PX``, renewed by a heartbeat); a run whose owner's lease is gone is
ended by the first survivor that sees it (``END_ORPHAN``: a compare-and-set on the run's last
seq and state, so two survivors cannot both end it) with one terminal
``completion{failed, reason: owner_lost}``.

Like the SQLite journal, ``record_*`` only queue; ``writer`` commits whatever is queued as one
pipeline as soon as the previous one is done (group commit), and reports each commit through
``on_commit``. Retention: a stream is capped at ``max_events`` entries (``XADD MAXLEN ~``),
a finished run's keys expire after ``max_age_s`` (``PEXPIRE``), and ``prune`` drops finished
runs beyond the newest ``keep``.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar, cast

import anyio
import msgspec
from anyio.abc import TaskGroup
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, OutOfMemoryError, RedisError, ResponseError

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.ports import ThreadInfo, Unavailable
from loopgate.contracts.principal import Owner
from loopgate.gateway.journal import redis_follow, redis_threads
from loopgate.gateway.journal.base import (
    EVENT_OVERHEAD_BYTES,
    CommitListener,
    CommitTurns,
    RunRecord,
)
from loopgate.gateway.journal.redis_connect import RedisTarget
from loopgate.gateway.journal.redis_follow import Deliver, StreamFollower
from loopgate.gateway.journal.redis_threads import ThreadClaims

log = logging.getLogger("loopgate.journal")

_encode = msgspec.json.Encoder().encode
_pack = msgspec.msgpack.Encoder().encode
_decode_record = msgspec.json.Decoder(RunRecord).decode
_decode_thread = msgspec.json.Decoder(ThreadInfo).decode
# Runs or threads read per round trip while listing one owner's.
OWNER_PAGE = 500
_decode_data = msgspec.json.Decoder(dict[str, Any]).decode

T = TypeVar("T", int, float)
Method = TypeVar("Method", bound=Callable[..., Coroutine[Any, Any, Any]])
UNAVAILABLE = "the shared journal (Redis) does not answer; retry shortly"
FULL = (
    "Redis is full (maxmemory reached, with maxmemory-policy noeviction): nothing more can be "
    "committed until it has room"
)
# An event queued for its run's next commit (seq, ts, kind, encoded data), by run.
Row = tuple[int, int, str, bytes]
Rows = dict[str, list[Row]]
# A command for a run's owner ({"verb", "run_id", …}) → its answer; None: no such run here.
CommandHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]
# The writer found that another instance appended to this run (its view here is stale).
LostListener = Callable[[str], None]

DEFAULT_LEASE_S = 10.0
DEFAULT_PREFIX = "loopgate"
RETRY_MIN_S = 0.05
RETRY_MAX_S = 1.0
CLOSE_FLUSH_S = 10.0
FOLLOW_COUNT = 512
COMMAND_TIMEOUT_S = 10.0
COMMAND_RETRY_S = 0.05
REPLICA_WAIT_MS = 1_000
SOCKET_SLACK_S = 5.0
REPLY_TTL_S = 30
SCAN_COUNT = 500

# KEYS: events, seq, record, owner.  ARGV: maxlen, first seq, n, record JSON or "", owner id,
# ms to keep a finished run, retry ("1": a batch resent after a lost reply), and the n events
# as one MessagePack array of 3n strings (ts, kind, data, …): one argument for the whole batch,
# which Redis unpacks in C, instead of 3n arguments each encoded and parsed on its own. ts
# travels as a string: it is a nanosecond count, past what a Lua number holds exactly.
# Returns the run's last seq. A batch that does not start right after the last seq fails with
# "SEQ <last>": the other instance's events stay, this one's are refused whole.
_APPEND = """
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local n = tonumber(ARGV[3])
if n > 0 then
  local first = tonumber(ARGV[2])
  if first ~= last + 1 then
    if ARGV[7] == '1' and last == first + n - 1 then return last end
    return redis.error_reply('SEQ ' .. last)
  end
  local rows = cmsgpack.unpack(ARGV[8])
  local events, maxlen = KEYS[1], ARGV[1]
  for i = 0, n - 1 do
    local at = i * 3
    redis.call('XADD', events, 'MAXLEN', '~', maxlen, (first + i) .. '-0',
      't', rows[at + 1], 'k', rows[at + 2], 'd', rows[at + 3])
  end
  last = first + n - 1
  redis.call('SET', KEYS[2], last)
end
local record = ARGV[4]
if record ~= '' then
  if n == 0 then
    local old = redis.call('GET', KEYS[3])
    if old and cjson.decode(old)['state'] == 'finished' then return last end
  end
  redis.call('SET', KEYS[3], record)
  if cjson.decode(record)['state'] == 'finished' then
    local ms = ARGV[6]
    for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ms) end
  elseif ARGV[5] ~= '' then
    redis.call('SET', KEYS[4], ARGV[5])
  end
end
return last
"""

# KEYS: events, seq, record, owner.  ARGV: the owner found dead, the last seq seen, maxlen,
# ts, kind, data, the finished record, ms to keep it. 1: ended here; 0: not (any more) ours
# to end — finished meanwhile, or another owner; 2: events appended since (its owner lives
# after all, or will be looked at again).
_END_ORPHAN = """
if redis.call('GET', KEYS[4]) ~= ARGV[1] then return 0 end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last ~= tonumber(ARGV[2]) then return 2 end
local old = redis.call('GET', KEYS[3])
if not old or cjson.decode(old)['state'] ~= 'running' then return 0 end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], (last + 1) .. '-0',
  't', ARGV[4], 'k', ARGV[5], 'd', ARGV[6])
redis.call('SET', KEYS[2], last + 1)
redis.call('SET', KEYS[3], ARGV[7])
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[8]) end
return 1
"""


class NotReplicated(Exception):
    """A commit Redis applied but fewer than ``replicas`` replicas confirmed in time."""

    def __init__(self, wanted: int) -> None:
        super().__init__(wanted)
        self.wanted = wanted


def _reaching(method: Method) -> Method:
    """A read or command of a request: Redis out of reach is the port's Unavailable (a 503
    with Retry-After over HTTP, a retry-later error elsewhere), not an internal error."""

    @functools.wraps(method)
    async def reaching(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except (RedisError, OSError):
            log.warning("journal: Redis did not answer a request's %s", method.__name__)
            raise Unavailable(UNAVAILABLE, retry_after=1) from None

    # The method's own type: an async def, which pyright holds to the Journal protocol's
    # (a types.CoroutineType), where a Callable[P, Coroutine] would not do.
    return cast(Method, reaching)


def _reading(method: Method) -> Method:
    """A read of a request (``_reaching``), tried once more on a fresh connection when its
    connection fails: after Redis restarted, or a network path dropped its state, every idle
    connection in the pool is stale, and each would fail one request (its server side gone,
    unseen until written to). The pool's idle connections go at the first failure, so the
    retry, and the requests after it, connect anew. Reads only: a write retried after a lost
    reply could be applied twice."""

    @functools.wraps(method)
    async def reading(journal: RedisJournal, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(journal, *args, **kwargs)
        except RedisConnectionError:
            await journal.drop_idle_connections()
        return await method(journal, *args, **kwargs)

    return _reaching(cast(Method, reading))


class RedisJournal:
    durable = True
    # Runs live beyond this process: the hub serves other instances' runs from here.
    shared = True

    def __init__(
        self,
        url: str,
        *,
        max_events: int = 100_000,
        max_age_s: float = 24 * 3600.0,
        lease_s: float | None = None,
        prefix: str | None = None,
    ) -> None:
        self.target = RedisTarget.parse(url)
        params = self.target.ours
        # One server's URL as the Redis client takes it (for a Sentinel URL: as given).
        self.url = self.target.url
        # Commits acknowledged only once on this many replicas (WAIT): what a failover
        # cannot take back. 0: once on the primary.
        self.replicas = _number(params, "replicas", 0)
        if self.replicas < 0:
            raise ValueError(f"replicas must be 0 or more, got {self.replicas}")
        self.lease_s = lease_s if lease_s is not None else _number(params, "lease", DEFAULT_LEASE_S)
        if self.lease_s <= 0:
            raise ValueError(f"the Redis lease must be positive, got {self.lease_s}")
        self.prefix = prefix or params.get("prefix", DEFAULT_PREFIX)
        self.max_events = max_events
        self.max_age_ms = max(int(max_age_s * 1000), 1)
        self.instance = uuid.uuid4().hex[:16]
        self.on_commit: CommitListener | None = None
        self.on_lost: LostListener | None = None
        # Why commits, and the lease's renewal, fail right now (readiness: /readyz), and
        # whether it is that Redis is full: new runs and pushes are then refused at once, as
        # nothing they add could be committed.
        self._commit_trouble: str | None = None
        self._lease_trouble: str | None = None
        self.on_command: CommandHandler | None = None
        # Any: redis-py annotates each reply as the union of every shape a reply may take.
        self._client: Any = None
        # The follower's own connection: its blocking read holds it.
        self._reader: Any = None
        self.follower = StreamFollower(
            self._key("wake", self.instance), 3 * self._lease_ms(), _sized_envelope
        )
        self._append_script: Any = None
        self._end_orphan_script: Any = None
        self.threads = ThreadClaims(partial(self._key, "thread-claim"), self._lease_ms)
        # What is queued for the next commit: the batch of generation ``_filling``.
        self._runs: dict[str, RunRecord] = {}
        self._threads: dict[str, ThreadInfo] = {}
        self._rows: Rows = {}
        self._filling = 1
        self._committed = 0
        self._turns = CommitTurns()
        # A commit that failed, retried before anything newer: (generation, runs, rows, threads).
        self._failed: tuple[int, dict[str, RunRecord], Rows, dict[str, ThreadInfo]] | None = None
        self._work = anyio.Event()
        self._resubscribe_delay = RETRY_MIN_S

    # --- keys -----------------------------------------------------------------------------

    def _run_keys(self, run_id: str) -> list[str]:
        p = f"{self.prefix}:{{{run_id}}}"
        return [f"{p}:events", f"{p}:seq", f"{p}:record", f"{p}:owner"]

    def _claim_key(self, run_id: str) -> str:
        return f"{self.prefix}:{{{run_id}}}:claim"

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def _lease_key(self, instance: str) -> str:
        return self._key("instance", instance)

    def _owned_key(self, instance: str) -> str:
        return self._key("owned", instance)

    async def _renew(self) -> None:
        """This instance's lease, and its place in the directory of instances (which the
        reapers read: only the runs of instances whose lease is gone are looked at)."""
        pipe = self._redis().pipeline(transaction=False)
        pipe.set(self._lease_key(self.instance), b"1", px=self._lease_ms())
        pipe.zadd(self._key("instances"), {self.instance: time.time_ns() // 1_000_000})
        claims = await self.threads.renew(pipe)
        _, _, *kept = await pipe.execute()
        self.threads.renewed(claims, kept)

    # --- lifecycle ------------------------------------------------------------------------

    async def open(self) -> list[RunRecord]:
        # Named, so that CLIENT LIST says which instance holds which connection. The socket
        # timeouts outlast the blocking commands each client sends (redis-py's default of 5 s
        # would end a 10 s BLPOP as a network error); a timeout in the URL still wins.
        name = f"{self.prefix}:{self.instance}"
        client = self.target.client(
            decode_responses=False,
            client_name=name,
            socket_timeout=COMMAND_TIMEOUT_S + SOCKET_SLACK_S,
        )
        try:
            await self._check_memory_policy(client)
        except BaseException:
            await client.aclose()
            raise
        self._client = client
        self._reader = self.target.client(
            decode_responses=False,
            single_connection_client=True,
            client_name=f"{name}:follow",
            socket_timeout=redis_follow.BLOCK_MS / 1000 + SOCKET_SLACK_S,
        )
        self._append_script = client.register_script(_APPEND)
        self._end_orphan_script = client.register_script(_END_ORPHAN)
        self.threads.register(client)
        await self._load_scripts()
        await self._renew()
        # Nothing to recover here: a run a dead instance left open is ended by whichever
        # instance finds its lease gone first (``writer``'s reaper), this one included.
        return []

    async def _check_memory_policy(self, client: Any) -> None:
        """A ValueError for a Redis that evicts keys when full; a warning for one that nothing
        bounds (docs/scale.md: Redis settings)."""
        try:
            memory = dict(await client.info("memory"))
        except ResponseError:
            return  # INFO refused (a managed Redis may): nothing to tell from
        refusal = self.target.eviction_refusal(memory)
        if refusal is not None:
            raise ValueError(refusal)
        if not int(memory.get("maxmemory") or 0):
            log.warning(
                "journal: Redis at %s has no maxmemory: nothing bounds what it holds "
                "(docs/scale.md: Redis settings)",
                self.target.where,
            )

    async def _load_scripts(self) -> None:
        """The scripts commits call by their sha (a Redis restarted, or flushed, lost them)."""
        await self._redis().script_load(_APPEND)
        await self._redis().script_load(redis_threads.KEEP)

    def _lease_ms(self) -> int:
        return max(int(self.lease_s * 1000), 1)

    def _redis(self) -> Any:
        if self._client is None:
            raise RuntimeError("the journal is closed")
        return self._client

    async def drop_idle_connections(self) -> None:
        """One connection failed: the pool's idle ones, as old, are likely stale too (a Redis
        restart out of their sight). They connect anew when next used."""
        await self._redis().connection_pool.disconnect(inuse_connections=False)

    def client(self) -> Any:
        """The journal's Redis client (its pool), for what else lives in this Redis beside
        the runs (the quotas' counters); RuntimeError before it opens and after it closes."""
        return self._redis()

    async def aclose(self) -> None:
        if self._client is None:
            return
        # A commit failing now (Redis away) had its time in the hub's drain, within the
        # shutdown's grace: waiting for it again would only hold the process.
        with anyio.move_on_after(CLOSE_FLUSH_S if self._failed is None else 0) as timer:
            await self.flush()
        if timer.cancelled_caught:
            runs = {*self._rows, *(self._failed[2] if self._failed else ())}
            log.error("journal: events of %d runs could not be committed", len(runs))
        client, self._client = self._client, None
        try:
            with anyio.move_on_after(2):
                await client.delete(
                    self._lease_key(self.instance), self._key("wake", self.instance)
                )
        except RedisError:
            pass
        await client.aclose()
        await self._reader.aclose()

    # --- writing --------------------------------------------------------------------------

    def record_run(self, record: RunRecord) -> None:
        self._runs[record.id] = msgspec.structs.replace(record)
        self._work.set()

    def record_thread(self, thread: ThreadInfo) -> None:
        self._threads[thread.id] = thread
        self._work.set()

    def record_event(self, envelope: Envelope, data: bytes) -> None:
        rows = self._rows.get(envelope.run_id)
        if rows is None:
            rows = self._rows[envelope.run_id] = []
        rows.append((envelope.seq, envelope.ts, envelope.kind, data))
        self._work.set()

    async def writer(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat)
            tg.start_soon(self._reaper)
            tg.start_soon(self._serve_commands)
            tg.start_soon(self.follower.run, self._reader)
            while True:
                await self._work.wait()
                self._work = anyio.Event()
                await self._commit()

    async def flush(self) -> None:
        ticket = self._filling if self._queued() else self._filling - 1
        await self._turns.until(lambda: self._committed >= ticket, partial(self._commit, ticket))

    def _queued(self) -> bool:
        return bool(self._runs or self._rows or self._threads)

    async def _commit(self, ticket: int | None = None) -> None:
        async with self._turns.turn():
            delay = RETRY_MIN_S
            while True:
                if ticket is not None and self._committed >= ticket:
                    return
                if self._failed is None and not self._queued():
                    return
                if self._client is None:
                    raise RuntimeError("the journal is closed; these events were not committed")
                if self._failed is not None:
                    # Sent again exactly as it was, newer events not added: the append script
                    # tells a batch Redis already has (its reply was lost) by its seqs.
                    generation, runs, rows, threads = self._failed
                    retry = True
                else:
                    runs, self._runs = self._runs, {}
                    threads, self._threads = self._threads, {}
                    rows, self._rows = self._rows, {}
                    generation = self._filling
                    self._filling += 1
                    retry = False
                written = None
                try:
                    # Sent whole whoever stopped waiting: the events are in the hub's memory.
                    with anyio.CancelScope(shield=True):
                        written = await self._write(runs, rows, threads, retry)
                except (RedisError, OSError, NotReplicated) as exc:
                    self._commit_failed(exc, delay)
                    self._failed = (generation, runs, rows, threads)
                    await anyio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
                # A shield that nothing cancels swallows nothing: the write ended or raised.
                assert written is not None
                marks, lost = written
                self._failed = None
                if self._commit_trouble is not None:
                    log.warning("journal: commits land again")
                    self._commit_trouble = None
                self._committed = generation
                if self.on_commit is not None and marks:
                    self.on_commit(marks)
                for run_id in lost:
                    self.threads.forget(run_id)
                    if self.on_lost is not None:
                        self.on_lost(run_id)
                return

    def _commit_failed(self, exc: Exception, delay: float) -> None:
        if isinstance(exc, NotReplicated):
            log.warning("journal commit not yet on %d replicas; retrying", exc.wanted)
            self._commit_trouble = f"commits are not yet on {exc.wanted} replicas"
        elif isinstance(exc, OutOfMemoryError):
            if self._commit_trouble != FULL:  # once: it lasts until there is room again
                log.error("journal: %s; new runs and pushes are refused meanwhile", FULL)
            self._commit_trouble = FULL
        else:
            log.exception("journal commit failed; retrying in %.2f s", delay)
            self._commit_trouble = _trouble(exc)

    @property
    def trouble(self) -> str | None:
        return self._commit_trouble or self._lease_trouble

    @property
    def full(self) -> bool:
        """Redis refuses what this instance writes for want of memory: its commits, or (an
        instance with none under way finds out so) its lease's renewal."""
        return FULL in (self._commit_trouble, self._lease_trouble)

    async def _write(
        self,
        runs: dict[str, RunRecord],
        rows: Rows,
        threads: dict[str, ThreadInfo],
        retry: bool,
    ) -> tuple[dict[str, int], list[str]]:
        pipe = self._redis().pipeline(transaction=False)
        # Each run's append, by its place among the replies (its registry updates follow it).
        order: dict[str, int] = {}
        maxlen = str(self.max_events)
        keep_ms = str(self.max_age_ms)
        for run_id in {**rows, **runs}:
            events = rows.get(run_id, [])
            record = runs.get(run_id)
            args: list[Any] = [
                maxlen,
                events[0][0] if events else 0,
                len(events),
                _encode(record) if record is not None else b"",
                self.instance if record is not None and record.state == "running" else "",
                keep_ms,
                "1" if retry else "0",
                _pack_rows(events),
            ]
            # By its sha, not through the Script object: that makes the pipeline ask Redis
            # whether the script exists (a round trip) before every commit. It was loaded at
            # open; after a Redis restart the commit fails NOSCRIPT, loads it and is retried.
            order[run_id] = len(pipe)
            pipe.evalsha(self._append_script.sha, 4, *self._run_keys(run_id), *args)
            if record is not None:
                self._index(pipe, record)
        for thread in threads.values():
            pipe.set(self._key("thread", thread.id), _encode(thread))
            pipe.zadd(self._key("threads"), {thread.id: thread.created_at})
        if self.replicas:
            pipe.execute_command("WAIT", self.replicas, REPLICA_WAIT_MS)
        results = await pipe.execute(raise_on_error=False)
        if self.replicas:
            *results, copies = results
            if not isinstance(copies, int) or copies < self.replicas:
                raise NotReplicated(self.replicas)
        if any(isinstance(result, NoScriptError) for result in results):
            await self._load_scripts()
        marks: dict[str, int] = {}
        lost: list[str] = []
        for run_id, at in order.items():
            result = results[at]
            if isinstance(result, ResponseError) and str(result).startswith("SEQ"):
                log.error("run %s: another instance appended to it; events refused", run_id)
                lost.append(run_id)
            elif run_id in rows and not isinstance(result, Exception):
                marks[run_id] = rows[run_id][-1][0]
        appends = set(order.values())
        for at, result in enumerate(results):
            if isinstance(result, Exception) and not (at in appends and str(result)[:3] == "SEQ"):
                raise result
        self.threads.committed(runs.values())
        return marks, lost

    def _index(self, pipe: Any, record: RunRecord) -> None:
        """The registry around a run's own keys: every run by creation, its thread's runs,
        and the runs this instance owns while they run (what survivors end if it dies)."""
        pipe.zadd(self._key("runs"), {record.id: record.created_at})
        pipe.zadd(self._key("thread-runs", record.thread_id), {record.id: record.created_at})
        # The run's thread, for as long as the run is in the registry: retention finds its
        # thread's index through it once the run's own keys (its record) have expired.
        pipe.hset(self._key("run-threads"), record.id, record.thread_id)
        if record.state == "running":
            pipe.sadd(self._owned_key(self.instance), record.id)
        else:
            pipe.srem(self._owned_key(self.instance), record.id)
            # The thread is free for its next run once this one's end is committed.
            self.threads.release_in(pipe, record)

    # --- reading --------------------------------------------------------------------------

    @_reading
    async def load_run(self, run_id: str) -> RunRecord | None:
        pending = self._runs.get(run_id)
        if pending is not None:
            return pending
        raw = await self._redis().get(self._run_keys(run_id)[2])
        return _decode_record(raw) if raw is not None else None

    @_reading
    async def owner(self, run_id: str) -> str | None:
        raw = await self._redis().get(self._run_keys(run_id)[3])
        return raw.decode() if raw is not None else None

    @_reading
    async def load_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> list[Envelope]:
        key = self._run_keys(run_id)[0]
        out: list[Envelope] = []
        total = 0
        start = after + 1
        while limit is None or len(out) < limit:
            count = FOLLOW_COUNT if limit is None else min(limit - len(out), FOLLOW_COUNT)
            entries = await self._redis().xrange(key, min=f"{start}-0", count=count)
            for entry_id, fields in entries:
                data = fields[b"d"]
                total += len(data) + EVENT_OVERHEAD_BYTES
                if out and max_bytes is not None and total > max_bytes:
                    return out
                out.append(_envelope(run_id, entry_id, fields))
            if len(entries) < count:
                break
            start = out[-1].seq + 1
        return out

    @_reaching
    async def watch(
        self, run_id: str, after: int, deliver: Deliver, failed: Callable[[], None]
    ) -> None:
        """Deliver the run's events after seq ``after`` as its owner commits them, until
        ``unwatch`` or ``failed`` (one blocking read for every run followed:
        gateway.journal.redis_follow)."""
        key = self._run_keys(run_id)[0]
        await self.follower.watch(self._redis(), run_id, key, after, deliver, failed)

    def unwatch(self, run_id: str) -> None:
        self.follower.unwatch(run_id)

    @_reading
    async def list_runs(
        self, limit: int, thread_id: str | None = None, owner: Owner | None = None
    ) -> list[RunRecord]:
        index = self._key("runs") if thread_id is None else self._key("thread-runs", thread_id)
        if owner is None:
            ids = [i.decode() for i in await self._redis().zrevrange(index, 0, limit - 1)]
            return [r for r in await self._records(ids) if r is not None]
        # One owner's: the index is read newest first, a page at a time, until enough are
        # found; retention bounds how far that can go.
        found: list[RunRecord] = []
        start = 0
        while len(found) < limit:
            page = await self._redis().zrevrange(index, start, start + OWNER_PAGE - 1)
            records = await self._records([i.decode() for i in page])
            found += [r for r in records if r is not None and r.owner == owner]
            if len(page) < OWNER_PAGE:
                break
            start += OWNER_PAGE
        return found[:limit]

    async def _records(self, ids: list[str]) -> list[RunRecord | None]:
        """The runs' records; a running one's ``last_seq`` is its stream's, as it is now (the
        record itself is written when the run starts and when it ends)."""
        if not ids:
            return []
        pipe = self._redis().pipeline(transaction=False)
        for run_id in ids:
            keys = self._run_keys(run_id)
            pipe.get(keys[2])
            pipe.get(keys[1])
        replies = await pipe.execute()
        records: list[RunRecord | None] = []
        for raw, last in zip(replies[::2], replies[1::2], strict=True):
            record = _decode_record(raw) if raw else None
            if record is not None and record.state == "running" and last is not None:
                record.last_seq = max(record.last_seq, int(last))
            records.append(record)
        return records

    @_reaching
    async def claim(self, run_id: str) -> bool:
        """Take a new run's id for this instance; False if another instance took it first (a
        client-chosen id started on two instances at once is started once)."""
        claimed = await self._redis().set(
            self._claim_key(run_id), self.instance, nx=True, px=self.max_age_ms
        )
        return bool(claimed)

    @_reaching
    async def claim_thread(self, thread_id: str, run_id: str) -> str | None:
        """Take a thread for a run of this instance until it ends (a continued thread takes
        one run at a time); None once taken, else the run holding it. The claim lasts a lease
        and is renewed with this instance's: a dead instance's lapses."""
        return await self.threads.take(thread_id, run_id)

    @_reading
    async def load_thread(self, thread_id: str) -> ThreadInfo | None:
        pending = self._threads.get(thread_id)
        if pending is not None:
            return pending
        raw = await self._redis().get(self._key("thread", thread_id))
        return _decode_thread(raw) if raw is not None else None

    @_reading
    async def list_threads(self, limit: int, owner: Owner | None = None) -> list[ThreadInfo]:
        found: list[ThreadInfo] = []
        start, page_size = 0, limit if owner is None else OWNER_PAGE
        while len(found) < limit:
            ids = await self._redis().zrevrange(self._key("threads"), start, start + page_size - 1)
            if not ids:
                break
            raws = await self._redis().mget([self._key("thread", i.decode()) for i in ids])
            threads = [_decode_thread(r) for r in raws if r is not None]
            found += [t for t in threads if owner is None or t.owner == owner]
            if owner is None or len(ids) < page_size:
                break
            start += page_size
        return found[:limit]

    # --- retention ------------------------------------------------------------------------

    async def delete(self, run_ids: list[str]) -> None:
        """Every key of these runs, and their entries in the registry: a run whose own keys
        expired is still in its thread's index, found through ``run-threads``."""
        if not run_ids:
            return
        client = self._redis()
        threads: list[str | None] = [
            t.decode() if t is not None else None
            for t in await client.hmget(self._key("run-threads"), run_ids)
        ]
        unknown = [run_id for run_id, t in zip(run_ids, threads, strict=True) if t is None]
        if unknown:
            # Indexed before ``run-threads`` was kept: their records say, while they last.
            found = {r.id: r.thread_id for r in await self._records(unknown) if r is not None}
            threads = [t or found.get(run_id) for run_id, t in zip(run_ids, threads, strict=True)]
        pipe = client.pipeline(transaction=False)
        for run_id, thread in zip(run_ids, threads, strict=True):
            pipe.delete(*self._run_keys(run_id), self._claim_key(run_id))
            pipe.zrem(self._key("runs"), run_id)
            if thread is not None:
                pipe.zrem(self._key("thread-runs", thread), run_id)
        pipe.hdel(self._key("run-threads"), *run_ids)
        await pipe.execute()

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        client = self._redis()
        beyond = await client.zrange(self._key("runs"), 0, -(keep + 1))
        old = await client.zrangebyscore(
            self._key("runs"), "-inf", f"({older_than_ns}", start=0, num=SCAN_COUNT
        )
        candidates = list(dict.fromkeys(i.decode() for i in [*beyond[:SCAN_COUNT], *old]))
        records = await self._records(candidates)
        doomed: list[str] = []
        expired: list[str] = []
        for run_id, record in zip(candidates, records, strict=True):
            if record is None:
                expired.append(run_id)  # its keys expired (max_age_s) before its index entry
            elif record.state == "finished" and (
                run_id in {b.decode() for b in beyond} or (record.finished_at or 0) < older_than_ns
            ):
                doomed.append(run_id)
        await self.delete(doomed + expired)
        return doomed + expired

    @_reaching
    async def forget_thread(self, thread_id: str) -> bool:
        await self.flush()
        pipe = self._redis().pipeline(transaction=False)
        pipe.delete(self._key("thread", thread_id))
        pipe.zrem(self._key("threads"), thread_id)
        deleted, _ = await pipe.execute()
        return bool(deleted)

    async def prune_threads(self, *, keep: int, older_than_ns: int) -> None:
        client = self._redis()
        index = self._key("threads")
        doomed = await client.zrange(index, 0, -(keep + 1))
        doomed += await client.zrangebyscore(
            index, "-inf", f"({max(older_than_ns, 0)}", start=0, num=SCAN_COUNT
        )
        if doomed:
            pipe = client.pipeline(transaction=False)
            pipe.delete(*[self._key("thread", i.decode()) for i in doomed])
            pipe.zrem(index, *doomed)
            await pipe.execute()

    # --- instances: leases, orphaned runs, commands ------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            await anyio.sleep(self.lease_s / 3)
            try:
                await self._renew()
            except (RedisError, OSError) as exc:
                if self._lease_trouble is None:
                    log.exception("journal: renewing this instance's lease failed; retrying")
                self._lease_trouble = _trouble(exc)
            else:
                self._lease_trouble = None

    async def _reaper(self) -> None:
        while True:
            await anyio.sleep(self.lease_s / 2)
            try:
                await self.end_orphans()
            except (RedisError, OSError):
                log.exception("journal: looking for runs of lost instances failed; retrying")

    async def end_orphans(self) -> list[str]:
        """End the running runs of instances whose lease is gone; returns the ones ended here.

        It reads the directory of instances and their leases, then only the runs a lost one
        owned: a sweep where no instance was lost costs one read per instance, however many
        runs are running. A lost instance leaves the directory once its runs are ended."""
        client = self._redis()
        others = [
            m.decode()
            for m in await client.zrange(self._key("instances"), 0, -1)
            if m.decode() != self.instance
        ]
        if not others:
            return []
        pipe = client.pipeline(transaction=False)
        for instance in others:
            pipe.exists(self._lease_key(instance))
        alive = await pipe.execute()
        ended: list[str] = []
        for instance, live in zip(others, alive, strict=True):
            if live:
                continue
            owned = self._owned_key(instance)
            cursor = 0
            while True:
                cursor, members = await client.sscan(owned, cursor, count=SCAN_COUNT)
                for member in members:
                    if await self._end_orphan(member.decode(), instance):
                        ended.append(member.decode())
                if cursor == 0:
                    break
            if not await client.scard(owned):
                await client.zrem(self._key("instances"), instance)
        return ended

    async def _end_orphan(self, run_id: str, owner: str) -> bool:
        client = self._redis()
        keys = self._run_keys(run_id)
        raw_last, raw_record = await client.mget(keys[1], keys[2])
        owned = self._owned_key(owner)
        if raw_record is None:
            await client.srem(owned, run_id)
            return False
        record = _decode_record(raw_record)
        if record.state != "running":
            await client.srem(owned, run_id)
            return False
        last = int(raw_last or 0)
        now = time.time_ns()
        record.state = "finished"
        record.status = "failed"
        record.finished_at = now
        record.last_seq = last + 1
        data = _encode({"status": "failed", "reason": "owner_lost"})
        args = [owner, last, self.max_events, now, "completion", data, _encode(record)]
        args.append(self.max_age_ms)
        done = int(await self._end_orphan_script(keys=keys, args=args))
        if done == 1:
            log.warning("run %s: its instance %s is gone; ended it (owner_lost)", run_id, owner)
            # Its thread is free for the next run (else once the dead owner's claim lapses).
            await self.threads.release(record.thread_id, run_id)
        if done != 2:
            # Ended, here or by another survivor, or not that instance's: no longer its.
            await client.srem(owned, run_id)
        return done == 1

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
        pubsub = self._redis().pubsub()
        try:
            await pubsub.subscribe(self._key("commands", self.instance))
            self._resubscribe_delay = RETRY_MIN_S
            pinged = anyio.current_time()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None and message["type"] == "message":
                    tg.start_soon(self._answer, message["data"])
                if anyio.current_time() - pinged >= self.lease_s / 3:
                    # A listener only reads: a connection whose Redis restarted out of its
                    # sight (no FIN across a network) would be waited on for good, and every
                    # command to this instance go unanswered. Written to, it fails at once.
                    await pubsub.ping()
                    pinged = anyio.current_time()
        finally:
            with anyio.CancelScope(shield=True), suppress(RedisError, OSError):
                await pubsub.aclose()

    async def _answer(self, raw: bytes) -> None:
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
        payload = _encode(answer if answer is not None else {"missing": True})
        pipe = self._redis().pipeline(transaction=False)
        pipe.rpush(reply, payload)
        pipe.expire(reply, REPLY_TTL_S)
        try:
            await pipe.execute()
        except (RedisError, OSError):
            # Applied, but not answered: its sender hears nothing and says so to its client.
            log.warning("journal: the answer to command %s was lost", command.get("verb"))

    @_reaching
    async def command(self, run_id: str, command: dict[str, Any]) -> dict[str, Any] | None:
        """Send a command to the instance that owns the run; its answer, or None when no
        instance owning it answered (gone, or the run finished and its owner let it go)."""
        owner = await self.owner(run_id)
        if owner is None or owner == self.instance:
            return None
        reply = self._key("reply", uuid.uuid4().hex)
        payload = _encode({**command, "run_id": run_id, "reply": reply})
        client = self._redis()
        deadline = anyio.current_time() + COMMAND_TIMEOUT_S
        while not await client.publish(self._key("commands", owner), payload):
            # Nobody listens: the owner is gone (so is its lease), or it is subscribing again
            # after a lost connection (a Redis restart), which takes it a moment.
            if anyio.current_time() > deadline or not await client.exists(self._lease_key(owner)):
                return None
            await anyio.sleep(COMMAND_RETRY_S)
        answer = await client.blpop([reply], timeout=COMMAND_TIMEOUT_S)
        if answer is None:
            return None
        decoded = msgspec.json.decode(answer[1], type=dict[str, Any])
        return None if decoded.get("missing") else decoded


def _trouble(exc: BaseException) -> str:
    """What a failed command says of Redis, in words for readiness (never its message: it
    may quote a host or a script)."""
    if isinstance(exc, OutOfMemoryError):
        return FULL
    if isinstance(exc, ResponseError):
        return "Redis refuses the journal's commands"
    return "Redis does not answer"


def _number(params: dict[str, str], name: str, default: T) -> T:
    """One of our URL parameters as a number of ``default``'s type, or a ValueError naming it."""
    if name not in params:
        return default
    try:
        return type(default)(params[name])
    except ValueError:
        raise ValueError(f"the Redis URL's {name} must be a number, got {params[name]!r}") from None


def _pack_rows(rows: list[Row]) -> bytes:
    # Strings only: the cmsgpack of Redis 7.0 reads no MessagePack ``bin``, and a payload is
    # JSON, hence UTF-8, so as a ``str`` it arrives byte for byte.
    flat: list[str] = []
    for _seq, ts, kind, data in rows:
        flat += (str(ts), kind, data.decode())
    return _pack(flat)


def _envelope(run_id: str, entry_id: bytes, fields: dict[bytes, bytes]) -> Envelope:
    seq = int(entry_id.split(b"-", 1)[0])
    return Envelope(
        run_id, seq, int(fields[b"t"]), fields[b"k"].decode(), _decode_data(fields[b"d"])
    )


def _sized_envelope(
    run_id: str, entry_id: bytes, fields: dict[bytes, bytes]
) -> tuple[Envelope, int]:
    return _envelope(run_id, entry_id, fields), len(fields[b"d"])
