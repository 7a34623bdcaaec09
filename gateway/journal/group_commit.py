"""Group commit: what the durable journals (SQLite, Redis) share of writing.

``record_*`` only queue. The hub runs ``writer``, which commits whatever is queued as soon as
the previous commit is done — one write for every push that arrived meanwhile, so a busy
gateway commits in big batches and a quiet one in small ones, with no fixed delay. ``flush``
lets a caller wait for its own events (an ingest push before its acknowledgement). A commit
that fails is sent again exactly as it was, before anything newer (backing off up to a
second), until it lands: a store that applied it but whose answer was lost tells it by its
seqs. A journal says how to write one batch (``_write_batch``) and which failures are worth a
retry; each commit is reported through ``on_commit``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import ClassVar, Generic, TypeVar

import anyio
import msgspec

from ...contracts.ports import ThreadInfo
from .base import CommitListener, RunRecord

log = logging.getLogger("loopgate.journal")

RETRY_MIN_S = 0.05
RETRY_MAX_S = 1.0
CLOSE_FLUSH_S = 10.0

# How a journal queues its events (a list of rows, rows by run…).
RowsT = TypeVar("RowsT")


class CommitTurns:
    """One commit at a time (or a step that must not overlap one); whoever needs a commit
    while one is under way waits for it to end, together with every other waiter.

    Not a lock queue: a lock is handed to its waiters one at a time, an event-loop iteration
    (and its poll) each, so a hundred pushes waiting on one commit cost a hundred iterations
    before any could go on — measured as a third of the gateway's CPU per event of 100
    concurrent ingest runs on the Redis journal. Here they all wake when the commit ends;
    the few it did not cover then take their turns."""

    def __init__(self) -> None:
        self._lock = anyio.Lock(fast_acquire=True)
        self._ended = anyio.Event()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        async with self._lock:
            try:
                yield
            finally:
                self._ended.set()
                self._ended = anyio.Event()

    async def until(self, done: Callable[[], bool], commit: Callable[[], Awaitable[None]]) -> None:
        """Return once ``done()``: wait for the commit under way, or ``commit()`` when none is."""
        while not done():
            if self._lock.locked():
                await self._ended.wait()
            else:
                await commit()


@dataclass(slots=True)
class Batch(Generic[RowsT]):
    """What one commit writes: all that was recorded since the previous one."""

    generation: int
    runs: dict[str, RunRecord]
    threads: dict[str, ThreadInfo]
    rows: RowsT


class GroupCommit(Generic[RowsT]):
    durable = True
    # The failures of ``_write_batch`` that a retry may get past (the store away, busy, full).
    RETRYABLE: ClassVar[tuple[type[Exception], ...]] = (Exception,)

    def __init__(self, rows: Callable[[], RowsT]) -> None:
        self.on_commit: CommitListener | None = None
        # What is queued for the next commit: the batch of generation ``_filling``.
        self._new_rows = rows
        self._runs: dict[str, RunRecord] = {}
        self._threads: dict[str, ThreadInfo] = {}
        self._rows = rows()
        self._filling = 1
        self._committed = 0
        self._turns = CommitTurns()
        # A commit that failed, retried before anything newer.
        self._failed: Batch[RowsT] | None = None
        # Why commits fail right now, for readiness (/readyz).
        self._commit_trouble: str | None = None
        self._work = anyio.Event()

    # --- what a journal provides ------------------------------------------------------------

    def _closed(self) -> bool:
        raise NotImplementedError

    async def _write_batch(self, batch: Batch[RowsT], retry: bool) -> Mapping[str, int]:
        """Write the batch whole, or raise; ``retry``: it was sent before and failed (it may
        have been applied). Returns the highest seq committed of each run it has events of."""
        raise NotImplementedError

    def _commit_failed(self, exc: Exception, delay: float) -> str | None:
        """Say so (the exception is being handled); returns the trouble for readiness."""
        log.exception("journal commit failed; retrying in %.2f s", delay)
        return None

    # --- recording ----------------------------------------------------------------------------

    def record_run(self, record: RunRecord) -> None:
        self._runs[record.id] = msgspec.structs.replace(record)
        self._work.set()

    def record_thread(self, thread: ThreadInfo) -> None:
        self._threads[thread.id] = thread
        self._work.set()

    @property
    def trouble(self) -> str | None:
        return self._commit_trouble

    # --- committing ---------------------------------------------------------------------------

    async def _commit_forever(self) -> None:
        """Commit whatever is recorded, as soon as the previous commit is done."""
        while True:
            await self._work.wait()
            self._work = anyio.Event()
            await self._commit()

    async def flush(self) -> None:
        # Everything recorded so far is in the queued batch or in the one being committed.
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
                if self._closed():
                    # Closed (a late caller at shutdown): retrying would wait forever.
                    raise RuntimeError("the journal is closed; these events were not committed")
                batch, retry = self._failed, True
                if batch is None:
                    batch, retry = self._take(), False
                marks: Mapping[str, int] | None = None
                try:
                    # A commit that has started finishes: its events are in the hub's memory
                    # and must reach the store whoever stopped waiting for them.
                    with anyio.CancelScope(shield=True):
                        marks = await self._write_batch(batch, retry)
                except self.RETRYABLE as exc:
                    self._commit_trouble = self._commit_failed(exc, delay)
                    self._failed = batch
                    await anyio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
                # A shield that nothing cancels swallows nothing: the write ended or raised.
                assert marks is not None
                self._failed = None
                if self._commit_trouble is not None:
                    log.warning("journal: commits land again")
                    self._commit_trouble = None
                self._committed = batch.generation
                if self.on_commit is not None and marks:
                    self.on_commit(marks)
                return

    def _take(self) -> Batch[RowsT]:
        """The queued batch, for a commit; the next one starts empty."""
        batch = Batch(self._filling, self._runs, self._threads, self._rows)
        self._runs, self._threads, self._rows = {}, {}, self._new_rows()
        self._filling += 1
        return batch

    async def _drain(self) -> bool:
        """Commit what is queued, before closing; False if that did not end in time. A commit
        failing now (the store away) had its time in the hub's drain, within the shutdown's
        grace: waiting for it again would only hold the process."""
        with anyio.move_on_after(CLOSE_FLUSH_S if self._failed is None else 0) as timer:
            await self.flush()
        return not timer.cancelled_caught
