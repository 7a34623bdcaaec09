"""A run's in-memory state and a subscriber's cursor over it."""

from __future__ import annotations

import math
import time
from array import array
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio
import msgspec

from ...contracts.encoded import EncodedEnvelopes
from ...contracts.envelope import Envelope
from ...contracts.ports import CutOff, RunInfo, RunSource
from ..journal.base import RunRecord
from .compact import CompactEvents


class Producer(Protocol):
    """The run's event source: the hub runs it, and relays commands to it."""

    async def run(self) -> None:
        """Produce the run's events until it ends (the hub's task for the run)."""
        ...

    def cancel(self) -> None: ...

    async def steer(self, content: str) -> str | None:
        """Deliver a steering message; a string is the reason it was not taken.

        ``ValueError`` for a message that is wrong in itself (the client's 422)."""
        ...

    def respond(self, request_id: str, decision: str) -> str | None:
        """Answer a pending permission request; a string is the reason it was not taken."""
        ...


# Reads a page of a run's committed events from the journal: (after, limit, max_bytes).
Pages = Callable[[int, int, int], Awaitable[list[Envelope]]]
_NO_KINDS: frozenset[str] = frozenset()


class Run:
    """One run: its journal (events in seq order), its subscribers, and its producer.

    A *hot* run holds its events in memory, as objects (``hot``); ``ends[i]`` is the bytes of
    events ``0 … i`` as the hub counts them, so a batch is bounded in bytes by one bisect.
    ``committed`` is the highest seq the journal has committed: subscribers and history read
    up to it, never beyond (with the memory journal it is always the last seq). Once a hot
    run has finished and its terminal event is committed, the hub *compacts* it, a chunk at a
    time from the first event: ``compact`` holds events ``0 … hot_base - 1`` encoded
    (``loopgate.gateway.hub.compact``), ``hot`` the rest, and ``retained`` counts both. Readers see
    the same events in either. A *cold* run is a finished one served from a durable journal
    page by page (``pages``); it holds no events.
    """

    def __init__(
        self,
        record: RunRecord,
        events: list[Envelope] | None = None,
        sizes: Sequence[int] = (),
        *,
        pages: Pages | None = None,
    ) -> None:
        self.id = record.id
        self.record = record
        self.hot: list[Envelope] = events or []
        self.ends = array("q")
        self.retained = 0
        for size in sizes:
            self.retained += size
            self.ends.append(self.retained)
        self.committed = len(self.hot)
        self.compact: CompactEvents | None = None
        self.hot_base = 0  # the index of hot[0]: the events compacted so far
        self.pages = pages
        self.subscribers: set[RunSubscription] = set()
        self.producer: Producer | None = None
        self.ended = anyio.Event()
        self.last_push_ns = record.created_at
        # Called with each accepted event whose kind is in ``observed``; a run observer adds
        # both for the runs it follows (telemetry, for the runs it traces). One that needs some
        # kinds only at times (telemetry: the first delta of each model call) narrows and
        # widens ``observed`` as it goes, so the hub skips the calls in between. An observer
        # may be a C-level callable (a deque's append): it is handed the envelope alone.
        self.observers: list[Callable[[Envelope], None]] = []
        # The union of what each observer wants (``want``): one observer's narrowing never
        # takes away kinds another needs.
        self.observed: frozenset[str] = _NO_KINDS
        self._wants: dict[object, frozenset[str]] = {}
        # Called with the run when its terminal event is accepted, before the observers are
        # handed that event. Neither these nor observers may raise.
        self.on_finish: list[Callable[[Run], None]] = []
        self.ingested_bytes = 0
        # Permission requests of this run no client has answered yet (the loop's broker counts).
        self.asking = 0
        # A view of a run another instance owns (a shared journal): its events come from the
        # journal as they are committed there, and commands go to its owner.
        self.remote = False
        # A view still being loaded for whoever asked for it (its first reader attaches as the
        # load returns): the sweep, which lets go of views nobody watches, leaves it be.
        self.loading = False
        self._waiter: anyio.Event | None = None
        # When its subscribers were last woken by a live event (time.monotonic): the
        # delivery window holds an event back only within a window of that.
        self.woken_at = -math.inf
        if record.state == "finished":
            self.ended.set()

    @property
    def finished(self) -> bool:
        return self.record.state == "finished"

    @property
    def last_seq(self) -> int:
        if self.pages is not None:
            return self.record.last_seq
        return self.hot_base + len(self.hot)

    @property
    def visible_seq(self) -> int:
        """The last seq a client may see: committed, so no crash can take it back."""
        return self.record.last_seq if self.pages is not None else self.committed

    @property
    def events(self) -> list[Envelope]:
        """Every event held in memory, as objects (a copy; decoded if compacted): for tools
        and tests."""
        return self.envelopes()

    def envelopes(self, start: int = 0, end: int | None = None) -> list[Envelope]:
        """Events ``start`` … ``end - 1`` held in memory (seqs ``start + 1`` … ``end``), as
        objects, hot or compacted: for history. Subscribers read batches instead."""
        stop = self.last_seq if end is None else min(end, self.last_seq)
        base = self.hot_base
        envelopes = self.compact.decode(start, stop) if self.compact is not None else []
        return envelopes + self.hot[max(start - base, 0) : max(stop - base, 0)]

    def compact_chunk(self, max_bytes: int) -> int:
        """Compact the next of this finished run's events: about ``max_bytes`` of them as the
        hub counts them, or one. Their objects go at once. Returns the change in ``retained``."""
        store = self.compact
        if store is None:
            store = self.compact = CompactEvents()
        hot, ends, base = self.hot, self.ends, self.hot_base
        done = ends[base - 1] if base else 0
        count = max(bisect_right(ends, done + max_bytes, base) - base, 1)
        store.add(hot[:count])
        del hot[:count]
        self.hot_base = base + count
        return self._recount()

    def compacted(self, ended: anyio.Event) -> int:
        """Every event is compacted: what only a running run needs goes (its producer, its
        observers and end hooks, which may hold whole object graphs of their own). ``ended``
        is an event already set, shared by every compacted run: its own, set for good, is 800
        bytes (most of them the deque its waiters were kept in). Returns the change in
        ``retained``."""
        assert self.compact is not None and not self.hot
        self.compact.seal()
        change = self._recount()
        del self.ends[:]
        self.settle(ended)
        return change

    def settle(self, ended: anyio.Event) -> None:
        """Finished for good, compacted or not: see ``compacted``."""
        self.ended = ended
        self._forget_producer()

    def _recount(self) -> int:
        """``retained`` counted again (the compacted events as stored, the others as the hub
        counts them); returns the change."""
        ends, base = self.ends, self.hot_base
        hot = ends[-1] - (ends[base - 1] if base else 0) if self.hot else 0
        retained = hot + (self.compact.nbytes if self.compact is not None else 0)
        change, self.retained = retained - self.retained, retained
        return change

    def release(self) -> None:
        """The hub dropped this finished run: let its events go now, whoever still points at
        the object (an exception's traceback, until the cyclic collector comes, or a late
        task). Nothing reads a dropped run: the hub makes a new one if it is asked again."""
        self.hot = []
        self.ends = array("q")
        self.compact = None
        self.hot_base = 0
        self.retained = 0
        self._forget_producer()

    def _forget_producer(self) -> None:
        # The producer (and an observer may) point back at the run.
        self.producer = None
        self.observers.clear()
        self.observed = _NO_KINDS
        self._wants.clear()
        self.on_finish.clear()

    def want(self, who: object, kinds: frozenset[str]) -> None:
        """Set the kinds ``who`` (an observer's owner) is handed from now on."""
        if self._wants.get(who) is kinds:
            return  # the common case on the hot path: nothing changed
        self._wants[who] = kinds
        self.observed = frozenset().union(*self._wants.values())

    def info(self) -> RunInfo:
        r = self.record
        # Finished only once the terminal event is committed: a crash before that ends the
        # run differently (server_restarted), and no client may have been told otherwise.
        ended = r.state == "finished" and self.visible_seq >= self.last_seq
        return RunInfo(
            id=r.id,
            thread_id=r.thread_id,
            source=r.source,
            state="finished" if ended else "queued" if r.state == "queued" else "running",
            status=r.status if ended else None,
            created_at=r.created_at,
            last_seq=self.visible_seq,
            subscribers=len(self.subscribers),
            metadata=r.metadata,
            input=r.input,
            awaiting="approval" if self.asking and not ended else msgspec.UNSET,
            owner=r.owner,
            agent=r.agent,
        )

    def notify(self) -> None:
        """Wake every subscriber waiting for new events (one Event per burst, not per event)."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    @property
    def has_waiters(self) -> bool:
        """A subscriber waits for this run's next event."""
        return self._waiter is not None

    def waiter(self) -> anyio.Event:
        if self._waiter is None:
            self._waiter = anyio.Event()
        return self._waiter


class RunSubscription:
    """A cursor over a run's journal that follows it live.

    Events are never copied per subscriber: a batch is a slice of the run's list, at most
    ``max_batch`` events and ``max_batch_bytes`` (or one event, whatever its size), so no write
    to a client is giant. The bound is on lag — how far the cursor may trail the newest
    event — so memory per subscriber is O(1), and a client that stops reading is cut off
    without slowing anyone else. A cold run is read page by page from the journal.
    """

    def __init__(
        self,
        run: Run,
        after: int,
        max_lag: int,
        max_batch: int,
        consumer: str = "api",
        *,
        max_batch_bytes: int = 1 << 20,
    ) -> None:
        self.run = run
        self.consumer = consumer
        self._cursor = min(max(after, 0), run.visible_seq)
        self.max_lag = max_lag
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self.cut_off = False
        self.rejoin = False  # cut off for no fault of its own (contracts.ports.CutOff)
        self.scope: anyio.CancelScope | None = None
        # Deadlines the hub watches (``Hub._watch``) instead of a timer each: a write to the
        # client must end by ``write_deadline`` (else the subscriber is cut off), and a wait
        # for events returns empty-handed at ``wait_deadline`` (a keep-alive is due). Both on
        # time.monotonic()'s clock (asyncio's own): anyio.current_time() costs microseconds
        # per call in finding the event loop, on every write and wait.
        self.write_deadline: float | None = None
        self.wait_deadline: float | None = None
        self.waiting = False  # for its run's next event
        self._done = run.finished and self._cursor >= run.last_seq
        # Events handed out so far (delivery telemetry).
        self.delivered = 0

    @property
    def cursor(self) -> int:
        return self._cursor

    @property
    def done(self) -> bool:
        return self._done

    def lagging(self) -> bool:
        return self.run.last_seq - self._cursor > self.max_lag

    def cut(self, rejoin: bool = False) -> None:
        """Called by the hub when this subscriber fell too far behind (``rejoin``: when the
        run's copy here is dropped)."""
        self.cut_off = True
        self.rejoin = rejoin
        if self.scope is not None:
            # The subscriber may be stuck writing to a client that never reads.
            self.scope.cancel()
        self.run.notify()

    async def next_batch(self, max_wait: float | None = None) -> list[Envelope]:
        batch = self._ready()
        if batch is None:
            batch = await self.next_encoded(max_wait)
        return batch if isinstance(batch, list) else batch.decode()

    async def next_encoded(
        self, max_wait: float | None = None
    ) -> list[Envelope] | EncodedEnvelopes:
        """``next_batch``; a compacted run's batch comes as it is stored, not decoded (for a
        reader that writes the bytes as they are: native SSE)."""
        run = self.run
        deadline: float | None = None
        while True:
            batch = self._ready()
            if batch is not None:
                return batch
            if run.pages is not None:
                return await self._page(run.pages)
            if max_wait is not None:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + max_wait
                if now >= deadline:
                    return []
                self.wait_deadline = deadline
            self.waiting = True
            try:
                await run.waiter().wait()
            finally:
                self.waiting = False
                self.wait_deadline = None

    def _ready(self) -> list[Envelope] | EncodedEnvelopes | None:
        """The next batch if it can be had at once from memory; None: wait for one (or read a
        page of a cold run)."""
        if self.cut_off:
            raise CutOff(self._cursor, self.rejoin)
        run = self.run
        if run.pages is not None:
            return None
        start = self._cursor
        if start >= run.committed:
            if run.finished and start >= run.last_seq:
                self._done = True
                return []
            return None
        end = min(run.committed, start + self.max_batch)
        batch: list[Envelope] | EncodedEnvelopes
        store = run.compact
        if store is not None and start < run.hot_base:
            # Bounded by the bytes stored: what a client is written.
            batch = store.batch(start, min(end, run.hot_base), self.max_batch_bytes)
            end = batch.end
        else:
            ends = run.ends
            budget = (ends[start - 1] if start else 0) + self.max_batch_bytes
            if ends[end - 1] > budget:
                end = max(bisect_right(ends, budget, start, end), start + 1)
            base = run.hot_base
            batch = run.hot[start - base : end - base]
        self._cursor = end
        self._done = run.finished and end >= run.last_seq
        self.delivered += end - start
        return batch

    async def _page(self, pages: Pages) -> list[Envelope]:
        batch = await pages(self._cursor, self.max_batch, self.max_batch_bytes)
        if batch:
            self._cursor = batch[-1].seq
        # An empty page ends it too: the journal has nothing more, whatever the record says.
        self._done = not batch or self._cursor >= self.run.last_seq
        self.delivered += len(batch)
        return batch

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<RunSubscription run={self.run.id} cursor={self._cursor}>"


def new_record(
    run_id: str, thread_id: str, source: RunSource, now: int, metadata: dict[str, Any]
) -> RunRecord:
    return RunRecord(
        id=run_id,
        thread_id=thread_id,
        source=source,
        state="running",
        status=None,
        created_at=now,
        metadata=metadata,
    )
