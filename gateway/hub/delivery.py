"""Delivery: subscribers attach to runs, are woken when events become visible, and are cut off
when they stall.

Every wake-up goes through :meth:`Delivery.show`: an event becomes visible when its journal
has it (at once with the memory journal, at its commit with a durable one, as it arrives from
the owner for another instance's run), and its run's waiting subscribers are woken either at
once (a terminal event, a commit: already coalesced; an event after a window or more of quiet:
nothing to coalesce it with) or with the next delivery window, one timer for the whole hub and
at most two writes per window per subscriber (the leading event, then the rest), not one per
event.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from ...contracts.ports import CutOff, LimitReached
from ..settings import Settings
from .run import Run, RunSubscription
from .table import RunTable

# The longest the deadline watch sleeps between looks (keep-alives and write timeouts
# shorter than four times this are looked at more often).
WATCH_TICK_S = 1.0

# Called with a subscription and "open" / "close" (telemetry: delivery per adapter).
SubscriptionObserver = Callable[[RunSubscription, str], None]


class Delivery:
    def __init__(self, settings: Settings, table: RunTable) -> None:
        self.settings = settings
        self.table = table
        self.observers: list[SubscriptionObserver] = []
        self._window = settings.delivery_window_s
        # Runs with events their waiting subscribers have not been woken for (insertion order:
        # woken in the order they were published to), and what wakes the window task.
        self._dirty: dict[Run, None] = {}
        self._woken: anyio.Event | None = None

    # --- waking ---------------------------------------------------------------------------

    def show(self, run: Run, seq: int, now: bool = False) -> None:
        """Events up to ``seq`` are committed: subscribers may read them; wake them ``now``
        or with the next window."""
        if seq > run.committed:
            run.committed = seq
            self.wake(run, now)

    def wake(self, run: Run, now: bool = False) -> None:
        """Wake the run's waiting subscribers: ``now``; at once too when they were last woken
        a window ago or more (a run's first event, one after a pause: nothing to coalesce it
        with, so it never waits); else with the next delivery window."""
        if now or not self._window:
            run.notify()
        elif run.has_waiters and run not in self._dirty:
            clock = time.monotonic()
            if clock - run.woken_at >= self._window:
                run.woken_at = clock
                run.notify()
                return
            self._dirty[run] = None
            if self._woken is not None:
                self._woken.set()

    def check_lag(self, run: Run) -> None:
        """Cut off the run's subscribers that fell too far behind (their clients resume from
        their cursors); called every few events by the producer side."""
        waiting = False
        for sub in [s for s in run.subscribers if s.lagging()]:
            # One waiting to be woken is not slow: the window coalescing its wake-ups was
            # outrun by the producer, so it is woken now instead.
            if sub.waiting:
                waiting = True
            else:
                sub.cut()
        if waiting:
            run.notify()

    async def windows(self) -> None:
        """The task waking the subscribers of runs with new events, all together once per
        window (lives with the hub)."""
        while True:
            if not self._dirty:
                self._woken = anyio.Event()
                await self._woken.wait()
                self._woken = None
            await anyio.sleep(self._window)
            dirty, self._dirty = self._dirty, {}
            clock = time.monotonic()
            for run in dirty:
                run.woken_at = clock
                run.notify()

    async def deadlines(self) -> None:
        """The task watching subscribers' deadlines, a tick at a time: a write past its
        deadline cuts its subscriber off; a wait past its deadline wakes its run's waiters
        (keep-alives)."""
        s = self.settings
        tick = min(WATCH_TICK_S, s.keepalive_s / 4, s.write_timeout_s / 4)
        while True:
            await anyio.sleep(tick)
            now = time.monotonic()
            for run in self.table.runs():
                wake = False
                for sub in run.subscribers:
                    if sub.write_deadline is not None and now >= sub.write_deadline:
                        sub.cut()
                    elif sub.wait_deadline is not None and now >= sub.wait_deadline:
                        wake = True
                if wake:
                    run.notify()

    def cut_all(self, run: Run, rejoin: bool = False) -> None:
        """Cut off every subscriber of the run (each resumes from its cursor elsewhere;
        ``rejoin``: at once, from the journal)."""
        for sub in list(run.subscribers):
            sub.cut(rejoin)

    def subscribers(self) -> dict[str, int]:
        """Open subscriptions by consumer (the adapter: "sse", "agui", …). Safe to call from
        another thread (a metrics exporter's): it only copies."""
        counts: dict[str, int] = {}
        for run in self.table.runs():
            for sub in list(run.subscribers):
                counts[sub.consumer] = counts.get(sub.consumer, 0) + 1
        return counts

    # --- attaching ------------------------------------------------------------------------

    @asynccontextmanager
    async def subscribe(
        self, run: Run, after: int, consumer: str
    ) -> AsyncIterator[RunSubscription]:
        s = self.settings
        if len(run.subscribers) >= s.max_subscribers_per_run:
            raise LimitReached(
                f"run {run.id} has the maximum of {s.max_subscribers_per_run} subscribers"
            )
        sub = RunSubscription(
            run,
            after,
            s.subscriber_max_lag,
            s.max_batch,
            consumer,
            max_batch_bytes=s.max_batch_bytes,
        )
        run.subscribers.add(sub)
        for observe in self.observers:
            observe(sub, "open")
        try:
            with anyio.CancelScope() as scope:
                sub.scope = scope
                yield sub
        finally:
            run.subscribers.discard(sub)
            for observe in self.observers:
                observe(sub, "close")
        if sub.cut_off and scope.cancelled_caught:
            raise CutOff(sub.cursor, sub.rejoin)
