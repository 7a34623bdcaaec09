"""Redis journal: several gateway processes share runs through Redis Streams (docs/scale.md).

This module is the storage; what the instances sharing it add — leases, the reaper of a lost
instance's runs, the commands sent to a run's owner — is the journal's ``cluster``
(gateway.journal.redis_membership).

Each run's events are a Redis Stream whose entry ids are ``<seq>-0``: the gateway's seq *is*
the stream position, so a resume cursor means the same thing on every instance, and an
append of a seq that is already there fails in Redis itself. Appends go through one Lua
script per run and commit (``APPEND``): it checks that the batch starts right after the last
seq, appends, and stores the run's record and its owner — all or nothing, so no seq is ever
doubled or skipped, whichever instances race. Keys of one run share a hash tag (``{run id}``):
the script touches one Cluster slot.

Like the SQLite journal, ``record_*`` only queue; ``writer`` commits whatever is queued as one
pipeline as soon as the previous one is done (gateway.journal.group_commit), and reports each
commit through ``on_commit``. Retention: a stream is capped at ``max_events`` entries
(``XADD MAXLEN ~``), a finished run's keys expire after ``max_age_s`` (``PEXPIRE``), and
``prune`` drops finished runs beyond the newest ``keep``.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from redis.exceptions import NoScriptError, OutOfMemoryError, RedisError, ResponseError

from ...contracts.envelope import Envelope
from ...contracts.ports import ThreadInfo
from ...contracts.principal import Owner
from .base import EVENT_OVERHEAD_BYTES, RunRecord
from .group_commit import Batch, GroupCommit
from .redis_blobs import RedisBlobs
from .redis_entries import (
    Row,
    Rows,
    decode_record,
    decode_thread,
    encode,
    from_entry,
    pack_rows,
)
from .redis_link import FULL, RedisLink, reaching, reading, trouble
from .redis_membership import RedisMembership

log = logging.getLogger("loopgate.journal")

# Runs or threads read per round trip while listing one owner's.
OWNER_PAGE = 500
FOLLOW_COUNT = 512
REPLICA_WAIT_MS = 1_000
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


class NotReplicated(Exception):
    """A commit Redis applied but fewer than ``replicas`` replicas confirmed in time."""

    def __init__(self, wanted: int) -> None:
        super().__init__(wanted)
        self.wanted = wanted


class RedisJournal(GroupCommit[Rows]):
    RETRYABLE = (RedisError, OSError, NotReplicated)

    def __init__(
        self,
        url: str,
        *,
        max_events: int = 100_000,
        max_age_s: float = 24 * 3600.0,
        lease_s: float | None = None,
        prefix: str | None = None,
    ) -> None:
        super().__init__(dict)
        self.link = RedisLink(
            url, max_events=max_events, max_age_s=max_age_s, lease_s=lease_s, prefix=prefix
        )
        self.blobs = RedisBlobs(self.link)
        # Runs live beyond this process: the hub serves other instances' runs from here.
        self.cluster = RedisMembership(self.link, lambda: self._commit_trouble)
        self._append_script: Any = None

    # --- lifecycle ------------------------------------------------------------------------

    async def open(self) -> list[RunRecord]:
        await self.link.open()
        self._append_script = self.link.client().register_script(_APPEND)
        await self._load_scripts()
        await self.cluster.join()
        # Nothing to recover here: a run a dead instance left open is ended by whichever
        # instance finds its lease gone first (the cluster's reaper), this one included.
        return []

    async def _load_scripts(self) -> None:
        """The scripts commits call by their sha (a Redis restarted, or flushed, lost them)."""
        await self.link.client().script_load(_APPEND)
        await self.cluster.load_scripts()

    async def aclose(self) -> None:
        if self.link.closed:
            return
        if not await self._drain():
            runs = {*self._rows, *(self._failed.rows if self._failed else ())}
            log.error("journal: events of %d runs could not be committed", len(runs))
        await self.cluster.leave()
        await self.link.close()

    @property
    def trouble(self) -> str | None:
        return self._commit_trouble or self.cluster.lease_trouble

    # --- writing --------------------------------------------------------------------------

    def record_event(self, envelope: Envelope, data: bytes) -> None:
        rows = self._rows.get(envelope.run_id)
        if rows is None:
            rows = self._rows[envelope.run_id] = []
        rows.append((envelope.seq, envelope.ts, envelope.kind, data))
        self._work.set()

    async def writer(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.cluster.serve)
            await self._commit_forever()

    def _closed(self) -> bool:
        return self.link.closed

    def _commit_failed(self, exc: Exception, delay: float) -> str | None:
        if isinstance(exc, NotReplicated):
            log.warning("journal commit not yet on %d replicas; retrying", exc.wanted)
            return f"commits are not yet on {exc.wanted} replicas"
        if isinstance(exc, OutOfMemoryError):
            if self._commit_trouble != FULL:  # once: it lasts until there is room again
                log.error("journal: %s; new runs and pushes are refused meanwhile", FULL)
            return FULL
        log.exception("journal commit failed; retrying in %.2f s", delay)
        return trouble(exc)

    async def _write_batch(self, batch: Batch[Rows], retry: bool) -> dict[str, int]:
        # Sent again exactly as it was after a failure: the append script tells a batch Redis
        # already has (its reply was lost) by its seqs.
        link = self.link
        runs, rows = batch.runs, batch.rows
        pipe = link.client().pipeline(transaction=False)
        # Each run's append, by its place among the replies (its registry updates follow it).
        order: dict[str, int] = {}
        maxlen = str(link.max_events)
        keep_ms = str(link.max_age_ms)
        empty: list[Row] = []
        for run_id in {**rows, **runs}:
            events = rows.get(run_id, empty)
            record = runs.get(run_id)
            args: list[Any] = [
                maxlen,
                events[0][0] if events else 0,
                len(events),
                encode(record) if record is not None else b"",
                link.instance if record is not None and record.state == "running" else "",
                keep_ms,
                "1" if retry else "0",
                pack_rows(events),
            ]
            # By its sha, not through the Script object: that makes the pipeline ask Redis
            # whether the script exists (a round trip) before every commit. It was loaded at
            # open; after a Redis restart the commit fails NOSCRIPT, loads it and is retried.
            order[run_id] = len(pipe)
            pipe.evalsha(self._append_script.sha, 4, *link.run_keys(run_id), *args)
            if record is not None:
                self._index(pipe, record)
        for thread in batch.threads.values():
            pipe.set(link.key("thread", thread.id), encode(thread))
            pipe.zadd(link.key("threads"), {thread.id: thread.created_at})
        if link.replicas:
            pipe.execute_command("WAIT", link.replicas, REPLICA_WAIT_MS)
        results = await pipe.execute(raise_on_error=False)
        if link.replicas:
            *results, copies = results
            if not isinstance(copies, int) or copies < link.replicas:
                raise NotReplicated(link.replicas)
        if any(isinstance(result, NoScriptError) for result in results):
            await self._load_scripts()
        marks: dict[str, int] = {}
        lost: list[str] = []
        for run_id, at in order.items():
            result = results[at]
            if isinstance(result, ResponseError) and str(result).startswith("SEQ"):
                await self._diverged(run_id, rows[run_id], int(str(result).split()[1]))
                lost.append(run_id)
            elif run_id in rows and not isinstance(result, Exception):
                marks[run_id] = rows[run_id][-1][0]
        appends = set(order.values())
        for at, result in enumerate(results):
            if isinstance(result, Exception) and not (at in appends and str(result)[:3] == "SEQ"):
                raise result
        self.cluster.committed(runs.values(), lost)
        return marks

    async def _diverged(self, run_id: str, refused: list[Row], last: int) -> None:
        """A batch of a run of this instance was refused: its stream in Redis ends at seq
        ``last``, not right before the batch. Past it, another instance appended (or ended
        the run: its lease was thought gone) and has the run's real end. Short of it, Redis
        lost acknowledged writes (a failover, a rolled-back AOF) and still says the run is
        ours and running: nobody else would end it, so it ends here, with one terminal event
        after every seq this instance gave out (up to the refused batch's last), so that each
        client, wherever its cursor, gets it; the seqs Redis lost stay a gap."""
        if last < refused[0][0] - 1:
            ended = await self.cluster.end_running(
                run_id, self.link.instance, "failed", "journal_diverged", shown=refused[-1][0]
            )
            if ended == 1:
                log.error(
                    "run %s: Redis lost events this instance had committed (its stream ends "
                    "at seq %d); ended it (journal_diverged)",
                    run_id,
                    last,
                )
                return
        log.error("run %s: another instance appended to it; events refused", run_id)

    def _index(self, pipe: Any, record: RunRecord) -> None:
        """The registry around a run's own keys: every run by creation, its thread's runs,
        and (the cluster's) the runs this instance owns while they run."""
        key = self.link.key
        pipe.zadd(key("runs"), {record.id: record.created_at})
        pipe.zadd(key("thread-runs", record.thread_id), {record.id: record.created_at})
        # The run's thread, for as long as the run is in the registry: retention finds its
        # thread's index through it once the run's own keys (its record) have expired.
        pipe.hset(key("run-threads"), record.id, record.thread_id)
        self.cluster.commit_ownership(pipe, record)

    # --- reading --------------------------------------------------------------------------

    @reading
    async def load_run(self, run_id: str) -> RunRecord | None:
        pending = self._runs.get(run_id)
        if pending is not None:
            return pending
        raw = await self.link.client().get(self.link.run_keys(run_id)[2])
        return decode_record(raw) if raw is not None else None

    @reading
    async def load_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> list[Envelope]:
        key = self.link.run_keys(run_id)[0]
        out: list[Envelope] = []
        total = 0
        start = after + 1
        while limit is None or len(out) < limit:
            count = FOLLOW_COUNT if limit is None else min(limit - len(out), FOLLOW_COUNT)
            entries = await self.link.client().xrange(key, min=f"{start}-0", count=count)
            for entry_id, fields in entries:
                data = fields[b"d"]
                total += len(data) + EVENT_OVERHEAD_BYTES
                if out and max_bytes is not None and total > max_bytes:
                    return out
                out.append(from_entry(run_id, entry_id, fields))
            if len(entries) < count:
                break
            start = out[-1].seq + 1
        return out

    @reading
    async def list_runs(
        self, limit: int, thread_id: str | None = None, owner: Owner | None = None
    ) -> list[RunRecord]:
        key, client = self.link.key, self.link.client()
        index = key("runs") if thread_id is None else key("thread-runs", thread_id)
        if owner is None:
            ids = [i.decode() for i in await client.zrevrange(index, 0, limit - 1)]
            return [r for r in await self._records(ids) if r is not None]
        # One owner's: the index is read newest first, a page at a time, until enough are
        # found; retention bounds how far that can go.
        found: list[RunRecord] = []
        start = 0
        while len(found) < limit:
            page = await client.zrevrange(index, start, start + OWNER_PAGE - 1)
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
        pipe = self.link.client().pipeline(transaction=False)
        for run_id in ids:
            keys = self.link.run_keys(run_id)
            pipe.get(keys[2])
            pipe.get(keys[1])
        replies = await pipe.execute()
        records: list[RunRecord | None] = []
        for raw, last in zip(replies[::2], replies[1::2], strict=True):
            record = decode_record(raw) if raw else None
            if record is not None and record.state == "running" and last is not None:
                record.last_seq = max(record.last_seq, int(last))
            records.append(record)
        return records

    @reading
    async def load_thread(self, thread_id: str) -> ThreadInfo | None:
        pending = self._threads.get(thread_id)
        if pending is not None:
            return pending
        raw = await self.link.client().get(self.link.key("thread", thread_id))
        return decode_thread(raw) if raw is not None else None

    @reading
    async def list_threads(self, limit: int, owner: Owner | None = None) -> list[ThreadInfo]:
        key, client = self.link.key, self.link.client()
        found: list[ThreadInfo] = []
        start, page_size = 0, limit if owner is None else OWNER_PAGE
        while len(found) < limit:
            ids = await client.zrevrange(key("threads"), start, start + page_size - 1)
            if not ids:
                break
            raws = await client.mget([key("thread", i.decode()) for i in ids])
            threads = [decode_thread(r) for r in raws if r is not None]
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
        link, client = self.link, self.link.client()
        threads: list[str | None] = [
            t.decode() if t is not None else None
            for t in await client.hmget(link.key("run-threads"), run_ids)
        ]
        unknown = [run_id for run_id, t in zip(run_ids, threads, strict=True) if t is None]
        if unknown:
            # Indexed before ``run-threads`` was kept: their records say, while they last.
            found = {r.id: r.thread_id for r in await self._records(unknown) if r is not None}
            threads = [t or found.get(run_id) for run_id, t in zip(run_ids, threads, strict=True)]
        pipe = client.pipeline(transaction=False)
        for run_id, thread in zip(run_ids, threads, strict=True):
            pipe.delete(*link.run_keys(run_id), link.claim_key(run_id))
            pipe.zrem(link.key("runs"), run_id)
            if thread is not None:
                pipe.zrem(link.key("thread-runs", thread), run_id)
        pipe.hdel(link.key("run-threads"), *run_ids)
        self.blobs.drop(pipe, run_ids)
        await pipe.execute()

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        client, index = self.link.client(), self.link.key("runs")
        beyond = await client.zrange(index, 0, -(keep + 1))
        old = await client.zrangebyscore(
            index, "-inf", f"({older_than_ns}", start=0, num=SCAN_COUNT
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

    @reaching
    async def forget_thread(self, thread_id: str) -> bool:
        await self.flush()
        pipe = self.link.client().pipeline(transaction=False)
        pipe.delete(self.link.key("thread", thread_id))
        pipe.zrem(self.link.key("threads"), thread_id)
        deleted, _ = await pipe.execute()
        return bool(deleted)

    async def prune_threads(self, *, keep: int, older_than_ns: int) -> None:
        client = self.link.client()
        index = self.link.key("threads")
        doomed = await client.zrange(index, 0, -(keep + 1))
        doomed += await client.zrangebyscore(
            index, "-inf", f"({max(older_than_ns, 0)}", start=0, num=SCAN_COUNT
        )
        if doomed:
            pipe = client.pipeline(transaction=False)
            pipe.delete(*[self.link.key("thread", i.decode()) for i in doomed])
            pipe.zrem(index, *doomed)
            await pipe.execute()
