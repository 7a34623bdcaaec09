"""A run's in-memory state and a subscriber's cursor over it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import anyio

from contracts.envelope import Envelope
from contracts.ports import CutOff, RunInfo, RunSource
from gateway.journal.base import RunRecord


class Producer(Protocol):
    """The run's event source, as far as commands reach it."""

    def cancel(self) -> None: ...

    async def steer(self, content: str) -> str | None:
        """Deliver a steering message; a string is the reason it was not taken.

        ``ValueError`` for a message that is wrong in itself (the client's 422)."""
        ...

    def respond(self, request_id: str, decision: str) -> str | None:
        """Answer a pending permission request; a string is the reason it was not taken."""
        ...


class Run:
    """One run: its journal (events in seq order), its subscribers, and its producer."""

    def __init__(self, record: RunRecord, events: list[Envelope] | None = None) -> None:
        self.id = record.id
        self.record = record
        self.events: list[Envelope] = events or []
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
        return len(self.events)

    def info(self) -> RunInfo:
        r = self.record
        return RunInfo(
            id=r.id,
            thread_id=r.thread_id,
            source=r.source,
            state=r.state,
            status=r.status,
            created_at=r.created_at,
            last_seq=len(self.events),
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

    Events are never copied per subscriber: a batch is a slice of the run's list. The bound is
    on lag — how far the cursor may trail the newest event — so memory per subscriber is O(1),
    and a client that stops reading is cut off without slowing anyone else.
    """

    def __init__(
        self, run: Run, after: int, max_lag: int, max_batch: int, consumer: str = "api"
    ) -> None:
        self.run = run
        self.consumer = consumer
        self._cursor = min(max(after, 0), run.last_seq)
        self.max_lag = max_lag
        self.max_batch = max_batch
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
            available = run.last_seq
            if self._cursor < available:
                end = min(available, self._cursor + self.max_batch)
                batch = run.events[self._cursor : end]
                self._cursor = end
                self._done = run.finished and end >= run.last_seq
                self.delivered += len(batch)
                return batch
            if run.finished:
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
