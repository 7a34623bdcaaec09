"""A Python loop's run driven in a thread of its own: ``--loop-runner thread``.

The run's generator is advanced by an event loop of its own in a worker thread, so a loop that
blocks (``time.sleep``, a synchronous HTTP client, heavy CPU) stalls only its own run, not the
gateway. Everything that touches the gateway's state — each event, steering, permission
questions, cancellation — goes back to the gateway's event loop through a blocking portal; the
loop sees the same run context, and the gateway the same events, as on the event loop.

A thread cannot be stopped from outside: a run the gateway gives up on (cancel grace, timeouts)
ends at once for its clients, and its thread goes when the loop's code next yields control.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from ...contracts.loop import Emit, LoopFault
from ...contracts.ports import LimitReached, RunFinished
from .context import GatewayRunContext, RequestView
from .python import ACLOSE_TIMEOUT_S, EventTaker, PerRun, drive, item_parts
from .source import is_terminal

T = TypeVar("T")
# Events the worker thread may have handed over before it waits for the gateway to take them:
# a fast loop's events cross in batches (a wake-up of the gateway's loop each, not a round trip
# per event), and what waits is bounded.
MAX_PENDING = 256


class ThreadedRun:
    """Implements :class:`contracts.loop.LoopRun`: the generator in a worker thread."""

    def __init__(self, fn: PerRun, ctx: GatewayRunContext) -> None:
        self.fn = fn
        self.ctx = ctx

    async def run(self, emit: Emit) -> None:
        error: BaseException | None = None
        async with BlockingPortal() as portal:
            handover = _Handover(EventTaker(emit), portal)
            worker = _Worker(self.fn, ThreadRunContext(self.ctx, portal), handover)
            thread = threading.Thread(
                target=worker.main, name=f"loopgate loop {self.ctx.run_id}", daemon=True
            )
            try:
                thread.start()
                await handover.ended.wait()
                if handover.fault is not None:
                    # The run is over; the generator is closed first (its finally blocks, and
                    # what it holds let go), as on the event loop, within the same bound.
                    worker.stop()
                    with anyio.move_on_after(ACLOSE_TIMEOUT_S):
                        await handover.finished.wait()
            finally:
                # Over, or given up on (a deadline, a cancel past its grace, shutdown): the
                # generator is cancelled at its next await, and nothing it asks for is waited
                # on here.
                worker.stop()
                await portal.stop(cancel_remaining=True)
            error = handover.fault or worker.error
            handover.fault = worker.error = None
        if error is not None:
            try:
                raise error
            finally:
                # Not left in this frame, which the traceback holds: the cycle would keep the
                # loop's last item (an event past the byte limit, say) until a full collection.
                del error

    def cancel(self) -> None:
        return None  # the loop reads ctx.cancelled, which the gateway has set

    async def steer(self, content: str) -> str | None:
        return self.ctx.queue_steer(content)


class _Handover:
    """A run's items from the worker thread to the gateway's loop, in order: the gateway takes
    whatever has come at each wake-up, with the taker the event-loop runner uses."""

    def __init__(self, take: EventTaker, portal: BlockingPortal) -> None:
        self.take = take
        self.portal = portal
        # Set on the gateway's loop: the worker is done (``finished``), or an item broke the
        # run (``fault``).
        self.ended = anyio.Event()
        self.finished = anyio.Event()
        self.fault: Exception | None = None
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._taking: Future[None] | None = None

    def put(self, item: Any) -> bool:
        """In the worker: hand ``item`` over; True once the run needs no more."""
        if self.fault is not None:
            return True
        with self._lock:
            self._items.append(item)
            taking = self._taking
            if taking is None:
                taking = self._taking = self.portal.start_task_soon(self._take_all)
            full = len(self._items) >= MAX_PENDING
        if full:
            taking.result()  # back-pressure: this thread's loop waits, the gateway's does not
        return _looks_terminal(item)

    def flush(self) -> None:
        """In the worker, at its end: wait until the gateway has taken every item."""
        with self._lock:
            taking = self._taking
        if taking is not None:
            taking.result()

    def finish(self) -> None:
        self.finished.set()
        self.ended.set()

    def _take_all(self) -> None:
        with self._lock:
            items, self._items = self._items, deque()
            self._taking = None
        for item in items:
            if self.fault is not None:
                return
            try:
                self.take(item)
            except (LoopFault, RunFinished, LimitReached) as exc:
                # Kept without its traceback, whose frames hold the item and its encoding: the
                # hub may have ended the run already (memory_limit), and its clients with it.
                self.fault = exc.with_traceback(None)
                self.ended.set()
            except Exception as exc:  # a bug: its traceback goes to the log with it
                self.fault = exc
                self.ended.set()


def _looks_terminal(item: Any) -> bool:
    try:
        kind, data = item_parts(item, 0)
    except LoopFault:
        return False  # the gateway's taker says what is wrong with it
    return type(kind) is str and type(data) is dict and is_terminal(kind, data)


class _Worker:
    """What runs in the thread: an event loop of its own driving the run's generator."""

    def __init__(self, fn: PerRun, ctx: ThreadRunContext, handover: _Handover) -> None:
        self.fn = fn
        self.ctx = ctx
        self.handover = handover
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._stopped = False

    def main(self) -> None:
        handover = self.handover
        try:
            asyncio.run(self._drive())
        except asyncio.CancelledError:
            pass  # stopped by the gateway, which no longer waits for it
        except BaseException as exc:
            self.error = exc
        # Unless the gateway stopped waiting (its portal is closed, or closing).
        with suppress(RuntimeError, CancelledError):
            handover.flush()  # what the loop yielded before it ended, or failed, is taken first
            handover.portal.call(handover.finish)

    async def _drive(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        await drive(self.fn, self.ctx, self.handover.put)

    def stop(self) -> None:
        """From the gateway's loop: cancel the generator if it still runs."""
        with self._lock:
            self._stopped = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with suppress(RuntimeError):  # its loop has already closed
                loop.call_soon_threadsafe(task.cancel)


class ThreadRunContext(RequestView):
    """Implements :class:`contracts.loop.RunContext` in the worker thread: each call that
    reads or waits on the gateway's state is made on the gateway's loop."""

    def __init__(self, ctx: GatewayRunContext, portal: BlockingPortal) -> None:
        super().__init__(ctx.request)
        self._ctx = ctx
        self._portal = portal

    @property
    def cancelled(self) -> bool:
        return self._ctx.cancelled  # a flag's read: safe from any thread

    async def wait_cancelled(self) -> None:
        await self._on_gateway(self._ctx.wait_cancelled)

    def take_steers(self) -> list[str]:
        return self._portal.call(self._ctx.take_steers)

    async def next_steer(self) -> str:
        return await self._on_gateway(self._ctx.next_steer)

    async def ask_permission(
        self,
        tool_call: Mapping[str, Any],
        *,
        options: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> str:
        ask = partial(self._ctx.ask_permission, tool_call, options=options, request_id=request_id)
        return await self._on_gateway(ask)

    async def _on_gateway(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Await ``fn()`` on the gateway's loop without blocking this thread's; cancelling the
        wait here cancels it there."""
        return await asyncio.wrap_future(self._portal.start_task_soon(fn))
