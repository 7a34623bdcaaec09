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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import CancelledError
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from loopgate.contracts.loop import Emit
from loopgate.gateway.loops.context import GatewayRunContext, RequestView
from loopgate.gateway.loops.python import EventTaker, PerRun, drive

T = TypeVar("T")


class ThreadedRun:
    """Implements :class:`contracts.loop.LoopRun`: the generator in a worker thread."""

    def __init__(self, fn: PerRun, ctx: GatewayRunContext) -> None:
        self.fn = fn
        self.ctx = ctx

    async def run(self, emit: Emit) -> None:
        async with BlockingPortal() as portal:
            worker = _Worker(self.fn, ThreadRunContext(self.ctx, portal), EventTaker(emit), portal)
            thread = threading.Thread(
                target=worker.main, name=f"loopgate loop {self.ctx.run_id}", daemon=True
            )
            try:
                thread.start()
                await worker.done.wait()
            finally:
                # Given up on (a deadline, a cancel past its grace, shutdown): the generator
                # is cancelled at its next await, and nothing it asks for is waited on here.
                worker.stop()
                await portal.stop(cancel_remaining=True)
        error, worker.error = worker.error, None
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


class _Worker:
    """What runs in the thread: an event loop of its own driving the run's generator."""

    def __init__(
        self,
        fn: PerRun,
        ctx: ThreadRunContext,
        take: EventTaker,
        portal: BlockingPortal,
    ) -> None:
        self.fn = fn
        self.ctx = ctx
        self.take = take
        self.portal = portal
        self.done = anyio.Event()  # set on the gateway's loop when the thread's work is over
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._stopped = False

    def main(self) -> None:
        try:
            asyncio.run(self._drive())
        except asyncio.CancelledError:
            pass  # stopped by the gateway, which no longer waits for it
        except BaseException as exc:
            self.error = exc
        finally:
            # Unless the gateway stopped waiting (its portal is closed, or closing).
            with suppress(RuntimeError, CancelledError):
                self.portal.call(self.done.set)

    async def _drive(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
        await drive(self.fn, self.ctx, partial(self.portal.call, self.take))

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
