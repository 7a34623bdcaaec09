"""A run's in-memory state and a subscriber's cursor over it."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio

from contracts.envelope import Envelope
from contracts.ports import CutOff, RunInfo, RunSource
from gateway.journal.base import RunRecord


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


class Run:
    """One run: its journal (events in seq order), its subscribers, and its producer.

    A *hot* run holds its events in memory; ``ends[i]`` is the bytes of ``events[:i + 1]`` as
    the hub counts them, so a batch is bounded in bytes by one bisect. ``committed`` is the
    highest seq the journal has committed: subscribers and history read up to it, never
    beyond (with the memory journal it is always the last seq). A *cold* run is a finished one
    served from a durable journal page by page (``pages``); it holds no events.
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
        self.events: list[Envelope] = events or []
        self.ends = array("q")
        self.retained = 0
        for size in sizes:
            self.retained += size
            self.ends.append(self.retained)
        self.committed = len(self.events)
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
        self.observed: frozenset[str] = frozenset()
        # Called with the run when its terminal event is accepted, before the observers are
        # handed that event. Neither these nor observers may raise.
        self.on_finish: list[Callable[[Run], None]] = []
        self.ingested_bytes = 0
        self._waiter: anyio.Event | None = None
        if record.state == "finished":
            self.ended.set()

    @property
    def finished(self) -> bool:
        return self.record.state == "finished"

    @property
    def last_seq(self) -> int:
        return self.record.last_seq if self.pages is not None else len(self.events)

    @property
    def visible_seq(self) -> int:
        """The last seq a client may see: committed, so no crash can take it back."""
        return self.record.last_seq if self.pages is not None else self.committed

    def release(self) -> None:
        """The hub dropped this finished run: let its events go now, whoever still points at
        the object (an exception's traceback, until the cyclic collector comes, or a late
        task). Nothing reads a dropped run: the hub makes a new one if it is asked again."""
        self.events = []
        self.ends = array("q")
        self.retained = 0
        # The producer (and an observer may) point back at the run.
        self.producer = None
        self.observers = []
        self.on_finish = []

    def info(self) -> RunInfo:
        r = self.record
        # Finished only once the terminal event is committed: a crash before that ends the
        # run differently (server_restarted), and no client may have been told otherwise.
        ended = r.state == "finished" and self.visible_seq >= self.last_seq
        return RunInfo(
            id=r.id,
            thread_id=r.thread_id,
            source=r.source,
            state="finished" if ended else "running",
            status=r.status if ended else None,
            created_at=r.created_at,
            last_seq=self.visible_seq,
            subscribers=len(self.subscribers),
            metadata=r.metadata,
            input=r.input,
        )

    def notify(self) -> None:
        """Wake every subscriber waiting for new events (one Event per burst, not per event)."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

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
        self.scope: anyio.CancelScope | None = None
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

    def cut(self) -> None:
        """Called by the hub when this subscriber fell too far behind."""
        self.cut_off = True
        if self.scope is not None:
            # The subscriber may be stuck writing to a client that never reads.
            self.scope.cancel()
        self.run.notify()

    async def next_batch(self, max_wait: float | None = None) -> list[Envelope]:
        run = self.run
        while True:
            if self.cut_off:
                raise CutOff(self._cursor)
            if run.pages is not None:
                return await self._page(run.pages)
            available = run.committed
            if self._cursor < available:
                start = self._cursor
                end = min(available, start + self.max_batch)
                ends = run.ends
                budget = (ends[start - 1] if start else 0) + self.max_batch_bytes
                if ends[end - 1] > budget:
                    end = max(bisect_right(ends, budget, start, end), start + 1)
                batch = run.events[start:end]
                self._cursor = end
                self._done = run.finished and end >= run.last_seq
                self.delivered += len(batch)
                return batch
            if run.finished and self._cursor >= run.last_seq:
                self._done = True
                return []
            waiter = run.waiter()
            if max_wait is None:
                await waiter.wait()
            else:
                with anyio.move_on_after(max_wait):
                    await waiter.wait()
                if not waiter.is_set():
                    return []

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
