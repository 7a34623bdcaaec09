"""Runs an external loop produces: its pushes (acknowledged once committed), its end, and the
channel that carries commands back to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from ...contracts.envelope import Envelope, LoopEvent
from ...contracts.ports import RunFinished, RunNotIngest, Unavailable
from ..sources.ingest import IngestProducer
from .run import Run

if TYPE_CHECKING:
    from .hub import Hub

# Commands waiting for an external loop to read them from its channel.
COMMAND_BUFFER = 64
_encode = msgspec.json.Encoder().encode


class Ingest:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        # Requests waiting for a commit to acknowledge (a push): a drain that gives up on the
        # journal ends their wait, as a retry-later, rather than leave them to the server's
        # shutdown (a 500).
        self._committing: set[anyio.CancelScope] = set()

    async def push(self, run_id: str, event: LoopEvent) -> Envelope:
        env = await self.push_nowait(run_id, event)
        await self.committed(self.hub.table.get(run_id), env.seq)
        return env

    async def push_nowait(self, run_id: str, event: LoopEvent) -> Envelope:
        hub = self.hub
        run = await hub.visible(run_id, control=True)
        remote = hub.remote
        if remote is not None and not run.finished:
            remote.check_room()
            if run.remote:
                # The owner appends (one writer per run): it answers once it is committed.
                return await remote.push(run, event)
        _check_ingest(run)
        if run.finished:
            raise RunFinished(run_id, run.record.status)
        run.last_push_ns = hub.clock()
        # Loop runs are bounded by their own limits (previews, not whole results); what an
        # external loop pushes is bounded here, by its encoded size.
        encoded = _encode(event.data)
        run.ingested_bytes += len(encoded)
        limit = hub.settings.max_run_bytes
        if run.ingested_bytes > limit:
            hub.end_too_large(run, "byte_limit", f"the limit of {limit} bytes of events")
        return hub.publish(run, event.kind, event.data, encoded)

    async def committed(self, run: Run | None, seq: int) -> None:
        """Return once the run's events up to ``seq`` are committed (None: all recorded so
        far); Unavailable if the drain gave up on the journal meanwhile."""
        hub = self.hub
        if run is not None and run.remote:
            return  # its owner answered each push once it was committed
        if run is None or run.committed < seq:
            # Everything recorded before this call is committed when it returns (the
            # writer's group commit, or this call's own if the writer is busy or gone).
            with anyio.CancelScope() as waiting:
                self._committing.add(waiting)
                try:
                    await hub.journal.flush()
                finally:
                    self._committing.discard(waiting)
            if waiting.cancelled_caught:
                # The drain gave up on the journal (Redis away): this is not acknowledged.
                raise Unavailable(
                    "the gateway is shutting down and could not commit this; retry shortly",
                    retry_after=1,
                )
            if run is not None and run.committed < seq and hub.remote is not None:
                # Refused by a shared journal: another instance ended the run meanwhile.
                raise RunFinished(run.id, run.record.status)

    def give_up(self) -> None:
        """The journal will not commit (a drain ran out of time): pushes waiting for it end."""
        for waiting in self._committing:
            waiting.cancel()

    async def end(self, run_id: str) -> None:
        hub = self.hub
        run = await hub.visible(run_id, control=True)
        if run.remote and not run.finished and hub.remote is not None:
            await hub.remote.end_ingest(run)
            return
        _check_ingest(run)
        hub.end_producer(run)
        await self.committed(run, run.last_seq)

    @asynccontextmanager
    async def command_channel(self, run_id: str) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        run = await self.hub.visible(run_id, control=True)
        _check_ingest(run)
        # A finished run has let its producer go: its channel carries nothing, as it would.
        producer = run.producer if isinstance(run.producer, IngestProducer) else None
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](COMMAND_BUFFER)
        if producer is not None:
            producer.commands = send.send_nowait
        try:
            async with receive:
                yield receive
        finally:
            if producer is not None:
                producer.commands = None
            send.close()


def _check_ingest(run: Run) -> None:
    if run.record.source != "ingest":
        raise RunNotIngest(f"run {run.id!r} is produced by its {run.record.source} source")
