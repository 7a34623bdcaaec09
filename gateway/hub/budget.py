"""What a hub may hold in memory, and what it lets go of: the memory budget.

Three duties, each over the run table (gateway.hub.table): an event past a bound either gets
room (finished runs dropped, oldest first) or is refused with the limit it reached; finished
runs are *compacted* into a few bytes objects once nothing can change them
(gateway.hub.compact); and retention (``max_runs``, ``max_run_age_s``) drops them from memory
and, through the journal, for good.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import anyio

from ..journal.base import Journal
from ..settings import Settings
from .run import Run
from .table import RunTable

log = logging.getLogger("loopgate.hub")

# A compacted run is held in chunks of about this many bytes of events (as the hub counts
# them; gateway.hub.compact says why), and compaction checkpoints after about as many: a big
# run, or a burst of small ones, does not stall the event loop while it is encoded (about a
# millisecond per chunk).
COMPACT_CHUNK_BYTES = 1 << 20
# A finished run whose events average more than this (as the hub counts them) is left as
# objects: they cost it under 1 % beyond its payloads, and encoding it all again only churns
# the allocator (measured: RSS 25-35 MiB higher under benchmarks/soak.py's 1.9 MiB events).
COMPACT_MAX_MEAN_BYTES = 64 << 10


class Overrun:
    """An event a run may not take: the run ends with ``reason``; ``limit`` says which bound."""

    __slots__ = ("limit", "reason")

    def __init__(self, reason: str, limit: str) -> None:
        self.reason = reason
        self.limit = limit


class MemoryBudget:
    def __init__(
        self, settings: Settings, table: RunTable, journal: Journal, clock: Callable[[], int]
    ) -> None:
        self.settings = settings
        self.table = table
        self.journal = journal
        self.clock = clock
        # A durable journal keeps what memory lets go of: a dropped run is read back from it,
        # not gone (410).
        self.durable = journal.durable
        # Finished runs whose terminal event is committed, waiting to be compacted.
        self._to_compact: deque[Run] = deque()
        self._compact_wanted = anyio.Event()
        self._compacted_since_checkpoint = 0

    # --- room for events ------------------------------------------------------------------

    def overrun(self, run: Run, seq: int, size: int) -> Overrun | None:
        """Room made for an event past a bound by dropping finished runs; else the bound it
        reached."""
        s = self.settings
        if seq >= s.max_events_per_run:
            return Overrun("event_limit", f"the limit of {s.max_events_per_run} events")
        if run.retained + size > s.max_run_retained_bytes:
            return Overrun(
                "memory_limit",
                f"the limit of {s.max_run_retained_bytes} bytes of events held for one run",
            )
        if not self.make_room(size):
            return Overrun(
                "memory_limit",
                f"the gateway's limit of {s.max_retained_bytes} bytes of events held in "
                "memory, with every finished run already dropped",
            )
        return None

    def make_room(self, needed: int) -> bool:
        """Drop finished runs, oldest first, until ``needed`` more bytes fit the total."""
        table, limit = self.table, self.settings.max_retained_bytes
        if table.retained + needed <= limit:
            return True
        why = f"max_retained_bytes ({limit} bytes of events in memory)"
        for run in table.hot_finished():
            # Watched runs stay until their readers are done; a durable run waits for its
            # last commit (it is read back from the journal once it is out of memory).
            if run.subscribers or run.visible_seq < run.last_seq:
                continue
            table.drop(run, None if self.durable else why)
            if table.retained + needed <= limit:
                return True
        return False

    # --- retention ------------------------------------------------------------------------

    async def sweep(self) -> None:
        """Finished runs past ``max_runs`` or ``max_run_age_s`` leave memory, and the
        journal prunes its own."""
        s, table = self.settings, self.table
        cutoff = self.clock() - int(s.max_run_age_s * 1e9)
        finished = [r for r in table.runs() if r.finished and not r.subscribers]
        finished.sort(key=lambda r: r.record.finished_at or 0)
        keep = s.max_runs if not self.durable else min(s.max_runs, s.cache_runs)
        excess = len(finished) - keep
        for i, run in enumerate(finished):
            old = (run.record.finished_at or 0) < cutoff
            if (i < excess or old) and run.visible_seq >= run.last_seq:
                # A durable journal still has the run (until it prunes it, below).
                why = f"max_run_age_s ({s.max_run_age_s:g} s)" if old else f"max_runs ({keep})"
                table.drop(run, None if self.durable else why)
        doomed = await self.journal.prune(keep=s.max_runs, older_than_ns=cutoff)
        for run_id in doomed:
            gone = table.get(run_id)
            if gone is not None and gone.finished and not gone.subscribers:
                table.drop(gone, None)
            owner = gone.record.owner if gone is not None else None
            table.remember_gone(run_id, "retention (max_runs, max_run_age_s)", owner)

    # --- compaction -----------------------------------------------------------------------

    def compact_later(self, run: Run) -> None:
        """A finished run whose every event is committed: nothing changes it any more."""
        if self.table.holds(run) and run.compact is None:
            self._to_compact.append(run)
            self._compact_wanted.set()

    async def compactor(self) -> None:
        """The task that compacts finished runs, one chunk at a time (lives with the hub)."""
        ended = anyio.Event()  # what every compacted run's ``ended`` is: set for good
        ended.set()
        while True:
            await self._compact_wanted.wait()
            self._compact_wanted = anyio.Event()
            while self._to_compact:
                run = self._to_compact.popleft()
                try:
                    await self._compact(run, ended)
                except Exception:
                    # Each step leaves the run whole, part objects, part compacted: it is
                    # served as it is, only bigger than it could be.
                    log.exception("compacting run %s failed; it stays as it is", run.id)
            self._compacted_since_checkpoint = 0

    async def _compact(self, run: Run, ended: anyio.Event) -> None:
        """Re-home a finished run's events into a few bytes objects (gateway.hub.compact), a
        chunk at a time from the first; each chunk's objects go as soon as it is encoded, so
        compacting a run never holds it twice. Readers go on meanwhile: a subscriber's cursor
        means the same seq in both forms."""
        table, ends = self.table, run.ends
        if run.retained > COMPACT_MAX_MEAN_BYTES * len(run.hot):
            run.settle(ended)
            return
        while run.hot:
            if not table.holds(run):
                return  # dropped since (meanwhile, or before its turn came)
            first = run.hot_base
            table.retained += run.compact_chunk(COMPACT_CHUNK_BYTES)
            done = ends[run.hot_base - 1] - (ends[first - 1] if first else 0)
            self._compacted_since_checkpoint += done
            if self._compacted_since_checkpoint >= COMPACT_CHUNK_BYTES:
                self._compacted_since_checkpoint = 0
                await anyio.lowlevel.checkpoint()
        if table.holds(run) and run.compact is not None:
            table.retained += run.compacted(ended)
