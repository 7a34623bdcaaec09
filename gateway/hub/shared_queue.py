"""The run queue the instances of a shared journal share (its store:
gateway.journal.redis_queue, or postgres_queue; docs/scale.md: roles and the run queue).

A loop run started on an instance that runs no loops (``role = "api"``), or that has no room
(``max_active_runs``), is accepted into the shared queue: validated here as any start (who
asks, the agent, the request), recorded ``queued`` with its place, and answered at once; 429
only once ``max_queued_runs`` wait. Every instance that runs loops takes the oldest waiting run
whenever it has room and starts it as if the request had come to it (as its principal): it
owns the run from then on. What a start takes besides room — a quota's slot, its thread's
claim — is taken then, by the worker; a start refused then ends the run ``failed`` with the
reason (``limit``, ``thread_busy``, ``invalid``), as nothing can answer the client's request
any more.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio
import msgspec

from ...contracts.client_errors import ClientError
from ...contracts.ports import (
    CommandResult,
    LimitReached,
    RunInfo,
    StartRun,
    ThreadBusy,
)
from ...contracts.principal import acting_as
from ..journal.base import RunRecord, SharedRunQueue
from .run import Run

if TYPE_CHECKING:
    from .hub import Hub

log = logging.getLogger("loopgate.hub")

# A worker's longest wait for a queued run (one blocking read), and for room to run one:
# each bounds how long a shutdown or a lost taker goes unnoticed.
TAKE_S = 1.0
# How often a worker looks for runs taken by workers that are gone (a few reads).
LOOK_S = 1.0
RETRY_MIN_S = 0.05
RETRY_MAX_S = 2.0

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(StartRun).decode


class SharedQueue:
    def __init__(self, hub: Hub, store: SharedRunQueue) -> None:
        self.hub = hub
        self.store = store
        self._freed = anyio.Event()
        hub.run_observers.append(self._observe)

    def _observe(self, run: Run) -> None:
        run.on_finish.append(self._finished)

    def _finished(self, run: Run) -> None:
        self._freed.set()

    # --- accepting ----------------------------------------------------------------------

    def takes(self, request: StartRun) -> bool:
        """Whether the start goes to the shared queue: a loop run on an instance that runs
        none, or that has no room for it. Only loop runs: a worker builds its producer from
        the request alone (the same agents on every instance); an external loop pushing its
        events (ingest) is served where it pushes."""
        if request.source != "loop":
            return False
        hub = self.hub
        return not hub.runs_loops or hub.queue.running >= hub.settings.max_active_runs

    async def accept(self, request: StartRun, record: RunRecord) -> RunInfo:
        record.state = "queued"
        limit = self.hub.settings.max_queued_runs
        place = await self.store.push(record, _encode(request), limit)
        if place is None:
            raise LimitReached(
                f"the run queue is full ({limit} runs wait for a worker); retry later",
                retry_after=5,
            )
        return msgspec.structs.replace(Run(record).info(), queue_position=place)

    async def info(self, run: Run) -> RunInfo:
        """A run another instance owns (or none yet): ``queued`` with its place while it
        waits."""
        info = run.info()
        if info.state != "queued":
            return info
        place = await self.store.position(run.id)
        return info if place is None else msgspec.structs.replace(info, queue_position=place)

    async def cancel(self, run: Run) -> CommandResult | None:
        """A cancel of a run that waits: it ends ``cancelled``, never having run. None when it
        does not wait any more (its worker has it: the cancel goes there)."""
        if run.finished or run.record.state != "queued":
            return None
        if not await self.store.end(run.id, "cancelled", "cancelled"):
            return None
        return CommandResult(run_id=run.id, accepted=True, detail="cancelled before it started")

    # --- a worker's part ----------------------------------------------------------------

    async def serve(self) -> None:
        """Take waiting runs while this instance has room for them, and give back the ones
        lost takers held; forever (until the hub closes)."""
        hub = self.hub
        delay = RETRY_MIN_S
        looked = -LOOK_S
        while not hub.closing:
            try:
                if time.monotonic() - looked >= LOOK_S:
                    looked = time.monotonic()
                    for run_id in await self.store.requeue_lost():
                        log.warning("run %s: its taker is gone; queued again", run_id)
                    for run_id in await self.store.requeue_own():
                        log.warning("run %s: taken here but not begun; queued again", run_id)
                if hub.queue.running >= hub.settings.max_active_runs:
                    self._freed = anyio.Event()
                    with anyio.move_on_after(TAKE_S):
                        await self._freed.wait()
                    continue
                taken = await self.store.take(TAKE_S)
                if taken is not None:
                    await self._start(taken)
            except Exception:
                # Redis away, most likely: the queue waits for it (nothing is taken meanwhile).
                log.exception("run queue: taking a queued run failed; retrying")
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            else:
                delay = RETRY_MIN_S

    async def _start(self, run_id: str) -> None:
        found = await self.store.entry(run_id)
        if found is None:
            return  # ended while it waited
        record, raw = found
        if self.hub.closing:
            # Not begun: it stays in this instance's taken list, and goes back to the queue
            # as soon as this instance's lease is gone (it gives it up as it leaves).
            return
        if not await self.store.begin(record):
            return
        request = _decode(raw)
        request.run_id = record.id
        principal = request.principal
        try:
            if principal is None:
                raise ClientError("the queued request names no principal")
            with acting_as(principal):
                await self.hub.start(request, queued=record)
        except Exception as exc:
            reason = _refusal(exc)
            if reason == "start_failed":
                log.exception("run %s: the start of the queued run failed", run_id)
            else:
                log.warning("run %s: the queued run was refused when taken (%s)", run_id, reason)
            await self.store.fail_begun(run_id, reason)


def _refusal(exc: Exception) -> str:
    """The reason a taken run's end gives for a start refused on the worker."""
    if isinstance(exc, ThreadBusy):
        return "thread_busy"
    if isinstance(exc, LimitReached):
        return "limit"
    if isinstance(exc, ClientError | ValueError):
        return "invalid"
    return "start_failed"
