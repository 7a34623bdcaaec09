"""The run queue of one instance: loop runs past ``max_active_runs`` wait here, in order, for a
running run to end, instead of being refused; 429 only once ``max_queued_runs`` wait already.

A queued run is a run like the others from its start (its id, record, subscribers, journal
entry, ``running`` there): only its producer waits for its turn, and RunInfo shows it as
``queued`` with its ``queue_position`` (1: next). The queue is this instance's own (memory or
SQLite journal); a gateway sharing a Redis journal keeps answering 429 at its limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import msgspec

from ...contracts.ports import LimitReached, RunInfo
from .run import Producer, Run

if TYPE_CHECKING:
    from .hub import Hub


def table_active(hub: Hub) -> Callable[[], int]:
    """How many runs of the hub have not ended (its run table's count)."""
    return lambda: hub.table.active


class _Turn:
    """A waiting run's place: ``woken`` once it is its turn (``granted``) or it left."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.woken = anyio.Event()
        self.granted = False


class RunQueue:
    """``active``: how many runs of this instance have not ended, queued ones included."""

    def __init__(self, max_running: int, max_queued: int, active: Callable[[], int]) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self._active = active
        # Runs waiting for their turn, oldest first, by id.
        self._waiting: dict[str, _Turn] = {}

    @property
    def running(self) -> int:
        return self._active() - len(self._waiting)

    def admit(self, queueable: bool) -> bool:
        """Whether a new run may go at once; False: it is to wait (``enqueue``). LimitReached
        when it may do neither: no room to run and (for a run that may wait) none to wait."""
        if self.running < self.max_running and not self._waiting:
            return True
        limit = self.max_running
        if not queueable or self.max_queued <= 0:
            raise LimitReached(f"too many active runs (limit {limit}); retry later")
        if len(self._waiting) >= self.max_queued:
            raise LimitReached(
                f"too many active runs (limit {limit}) and the run queue is full "
                f"({self.max_queued} waiting); retry later"
            )
        return False

    def producer(self, hub: Hub, run: Run, producer: Producer, goes: bool) -> Producer:
        """The run's producer: as it is for a run that goes now, else one that waits first."""
        if goes:
            self.started(run)
            return producer
        self.enqueue(run)
        return QueuedProducer(hub, self, run, producer)

    def started(self, run: Run) -> None:
        """The run goes now: when it ends, the next waiting one goes."""
        run.on_finish.append(self._next)

    def enqueue(self, run: Run) -> None:
        self._waiting[run.id] = _Turn(run)
        # However it ends while it waits (cancelled, a shutdown), its place goes.
        run.on_finish.append(self.leave)

    def position(self, run_id: str) -> int | None:
        """1 for the next run to go; None for a run that is not waiting."""
        if run_id not in self._waiting:
            return None
        return list(self._waiting).index(run_id) + 1

    def info(self, run: Run) -> RunInfo:
        """The run's RunInfo, ``queued`` with its position while it waits."""
        info = run.info()
        position = self.position(run.id)
        if position is None or info.state != "running":
            return info
        return msgspec.structs.replace(info, state="queued", queue_position=position)

    async def turn(self, run: Run) -> bool:
        """Wait for the run's turn: True once it may go; False when it left the queue first."""
        turn = self._waiting.get(run.id)
        if turn is None:
            return False
        await turn.woken.wait()
        return turn.granted

    def leave(self, run: Run) -> None:
        """The run stops waiting (cancelled): whoever waits for its turn is woken."""
        turn = self._waiting.pop(run.id, None)
        if turn is not None:
            turn.woken.set()

    def _next(self, ended: Run) -> None:
        while self._waiting and self.running < self.max_running:
            turn = self._waiting.pop(next(iter(self._waiting)))
            self.started(turn.run)
            turn.granted = True
            turn.woken.set()


class QueuedProducer:
    """A queued run's producer: waits for the run's turn, then is the producer it stands for.
    Cancelled while waiting, the run ends ``cancelled`` without having run."""

    def __init__(self, hub: Hub, queue: RunQueue, run: Run, inner: Producer) -> None:
        self.hub = hub
        self.queue = queue
        self.run_ = run
        self.inner = inner
        self._started = False

    async def run(self) -> None:
        if not await self.queue.turn(self.run_):
            if not self.run_.finished:
                self.hub.publish(self.run_, "completion", {"status": "cancelled"})
            return
        self._started = True
        await self.inner.run()

    def cancel(self) -> None:
        if self._started:
            self.inner.cancel()
        else:
            self.queue.leave(self.run_)

    async def steer(self, content: str) -> str | None:
        if not self._started:
            return "the run is queued and has not started; steer it once it runs"
        return await self.inner.steer(content)

    def respond(self, request_id: str, decision: str) -> str | None:
        if not self._started:
            return "the run is queued and has asked nothing yet"
        return self.inner.respond(request_id, decision)
