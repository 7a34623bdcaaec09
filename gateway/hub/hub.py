"""The hub: the run service every adapter uses (contracts.ports.RunService).

It is a façade over its parts, each with a public interface the Redis peers' code
(gateway.hub.remote) uses as the hub does: the run table (gateway.hub.table), the memory
budget (gateway.hub.budget: room, retention, compaction), delivery (gateway.hub.delivery:
subscribers, windows, keep-alive), threads (gateway.hub.threads) and the pushes of external
loops (gateway.hub.ingest). What stays here: a run's start, its events' append
(:meth:`Hub.publish`, the hot path), its end, and commands to its producer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, NoReturn

import anyio
import msgspec
from anyio.abc import TaskGroup

from ...contracts.agents import AgentInfo
from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import Envelope, LoopEvent
from ...contracts.ports import (
    CommandResult,
    LimitReached,
    RunExists,
    RunFinished,
    RunInfo,
    RunNotFound,
    RunTooLarge,
    StartRun,
    ThreadInfo,
)
from ..agents.table import Agents
from ..identity.audit import audit
from ..journal.base import EVENT_OVERHEAD_BYTES, EndedListener, Journal, RunRecord
from ..settings import Settings
from . import access
from .attachments import Attachments
from .budget import MemoryBudget
from .commands import Commands
from .delivery import Delivery, SubscriptionObserver
from .ingest import Ingest
from .loader import Loader
from .orphans import OrphanSweep
from .queue import RunQueue, table_active
from .remote import Remote
from .run import Producer, Run, RunSubscription
from .shared_queue import SharedQueue
from .shutdown import end_interrupted, stop_runs
from .source import RunObserver, Source, input_messages, start_record
from .table import HubStats, RunTable
from .threads import Threads

log = logging.getLogger("loopgate.hub")

# How often (in events) a run checks its subscribers' lag: cheap enough for the hot path,
# frequent enough that a stuck client is noticed long before memory matters.
LAG_CHECK_EVERY = 64
SWEEP_INTERVAL_S = 1.0
_encode = msgspec.json.Encoder().encode


__all__ = ["Hub", "HubStats", "RunObserver", "Source", "SubscriptionObserver"]


class Hub:
    """Implements :class:`contracts.ports.RunService` for every adapter."""

    def __init__(
        self,
        settings: Settings,
        journal: Journal,
        sources: Mapping[str, Source],
        *,
        clock: Callable[[], int] = time.time_ns,
        roster: Agents | None = None,
    ) -> None:
        self.settings = settings
        self.journal = journal
        self.sources = dict(sources)
        self.clock = clock
        self.run_observers: list[RunObserver] = []
        # Told of the runs ended here for an owner that could not (end_interrupted, Remote).
        self.end_observers: list[EndedListener] = []
        # Checks every start passes first (quotas), in order.
        self.admission: list[access.Admission] = []
        # Tasks that live as long as the hub does, started when it is entered.
        self.services: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self.table = RunTable(settings.max_dropped_ids)
        self.table.on_gone = None if journal.durable else journal.blobs.release
        self.attachments = Attachments(journal.blobs, settings.max_attachment_store_bytes)
        self.orphans = OrphanSweep(journal, self.table, self.attachments, settings, clock)
        self.budget = MemoryBudget(settings, self.table, journal, clock)
        self.delivery = Delivery(settings, self.table)
        self.threads = Threads(settings, self.table, journal, clock, roster)
        self.ingest = Ingest(self)
        self.commands = Commands(self)
        self.queue = RunQueue(
            settings.max_active_runs, settings.max_queued_runs, table_active(self)
        )
        self._durable = journal.durable
        journal.on_commit = self._committed
        # A journal other instances share (Redis): their runs are served here too, as remote
        # views (gateway.hub.remote), and commands to them go to their owners.
        self.remote = Remote(self, journal.cluster) if journal.cluster is not None else None
        self.loader = Loader(self.table, journal)
        self.loader.remote = self.remote
        # The run queue the instances share (Redis): runs this instance has no room for wait there.
        store = journal.cluster.run_queue if journal.cluster is not None else None
        self.shared = SharedQueue(self, store) if store is not None else None
        if self.shared is not None and self.runs_loops:
            self.services.append(self.shared.serve)
        self._tg: TaskGroup | None = None
        self._closing = False

    @property
    def runs_loops(self) -> bool:
        """Whether this instance runs loops (starts runs' producers, takes queued runs): an
        ``api`` instance only accepts them."""
        return self.settings.role != "api"

    @property
    def roster(self) -> Agents | None:
        """The agents behind the ``loop`` source, started and closed with the hub (none:
        ``loop`` is a source like the others); kept by the threads part, replaced on reload."""
        return self.threads.roster

    @roster.setter
    def roster(self, roster: Agents | None) -> None:
        self.threads.roster = roster

    # --- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Hub:
        await end_interrupted(self, await self.journal.open())
        if self.roster is not None:
            await self.roster.start()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.journal.writer)
        self._tg.start_soon(self._housekeeping)
        self._tg.start_soon(self.delivery.windows)
        self._tg.start_soon(self.delivery.deadlines)
        self._tg.start_soon(self.budget.compactor)
        for service in self.services:
            self._tg.start_soon(service)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.drain()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        if self.roster is not None:
            # Not in the shield below: a loop may leave a task group it entered in start().
            await self.roster.aclose()
        with anyio.CancelScope(shield=True):
            await self.journal.aclose()

    @property
    def closing(self) -> bool:
        """Shutting down: no new runs, none taken over."""
        return self._closing

    async def drain(self) -> None:
        """Graceful shutdown: ask producers to stop, then end whatever is still running."""
        if self._closing:
            return
        self._closing = True
        await stop_runs(self)

    async def _housekeeping(self) -> None:
        while True:
            await anyio.sleep(SWEEP_INTERVAL_S)
            try:
                await self.sweep()
            except Exception:
                log.exception("journal housekeeping failed; retrying")

    async def sweep(self) -> None:
        """Views nobody watches go, and retention drops what is past it."""
        if self.remote is not None:
            self.remote.sweep()
        await self.budget.sweep()
        await self.orphans.sweep()

    def _committed(self, marks: Mapping[str, int]) -> None:
        """The journal committed these runs' events up to these seqs: show them."""
        table, show = self.table, self.delivery.show
        for run_id, seq in marks.items():
            run = table.get(run_id)
            if run is not None and seq > run.committed:
                # At once, not with the window: a commit has coalesced its events already.
                show(run, seq, True)
                if run.finished and seq >= run.last_seq:
                    self.budget.compact_later(run)

    # --- the producer side (hot path) ---------------------------------------------------

    def publish(
        self, run: Run, kind: str, data: dict[str, Any], encoded: bytes | None = None
    ) -> Envelope:
        """Append one event to the run's journal and wake its subscribers. Never blocks.

        ``encoded`` is ``data`` already encoded, if the caller has it. With a durable journal
        subscribers are woken when the event is committed, not here."""
        if run.finished:
            raise RunFinished(run.id, run.record.status)
        s, table = self.settings, self.table
        # The next after the last, however many of them compaction has taken from ``hot``
        # (``Run.last_seq``, inline: this is the hot path, and a running run has no pages).
        seq = run.hot_base + len(run.hot) + 1
        terminal = kind == "completion" and is_terminal_completion(kind, data)
        if encoded is None:
            encoded = _encode(data)
        size = len(encoded) + EVENT_OVERHEAD_BYTES
        retained = run.retained + size
        # The terminal event always fits (it is small), so even a runaway run ends cleanly.
        if not terminal and (
            seq >= s.max_events_per_run
            or retained > s.max_run_retained_bytes
            or table.retained + size > s.max_retained_bytes
        ):
            overrun = self.budget.overrun(run, seq, size)
            if overrun is not None:
                self.end_too_large(run, overrun.reason, overrun.limit)
        env = Envelope(run.id, seq, self.clock(), kind, data)
        run.hot.append(env)
        run.retained = retained
        run.ends.append(retained)
        table.retained += size
        table.accepted += 1
        if self._durable:
            self.journal.record_event(env, encoded)
        else:
            # Committed as it is appended (the memory journal): ``Delivery.show``, inline.
            run.committed = seq
            self.delivery.wake(run, terminal)
        if terminal:
            # Before the observers see the terminal event: they may want the run's end first.
            self._finish(run, data.get("status"))
        # Only the kinds the run's observers asked for: most events (deltas) are not.
        if kind in run.observed:
            for observe in run.observers:
                observe(env)
        if not terminal and not seq % LAG_CHECK_EVERY and run.subscribers:
            self.delivery.check_lag(run)
        return env

    def end_too_large(self, run: Run, reason: str, limit: str) -> NoReturn:
        """End the run at a bound it reached; RunTooLarge to whoever added the event."""
        message = f"run {run.id} reached {limit}"
        self.publish(run, "completion", {"status": "failed", "reason": reason, "message": message})
        raise RunTooLarge(f"{message}; it has been ended")

    def end_producer(self, run: Run, reason: str = "truncated") -> None:
        """The producer stopped; synthesise the terminal event it never sent."""
        if not run.finished:
            self.publish(run, "completion", {"status": "failed", "reason": reason})

    def _finish(self, run: Run, status: Any) -> None:
        record = run.record
        record.state = "finished"
        record.status = status if isinstance(status, str) else "failed"
        record.finished_at = self.clock()
        record.last_seq = run.last_seq
        record.resume = None  # nothing resumes a finished run: its request need not be kept
        self.table.active -= 1
        self.threads.release_claim(run)
        self.table.finished(run)
        for hook in run.on_finish:
            hook(run)
        self.journal.record_run(record)
        run.ended.set()
        if run.committed >= run.last_seq:
            self.budget.compact_later(run)

    # --- RunService: runs ---------------------------------------------------------------

    async def start(self, request: StartRun, *, queued: RunRecord | None = None) -> RunInfo:
        """``queued``: the record of a run this instance took from the shared queue."""
        if self._closing:
            raise LimitReached("the server is shutting down", retry_after=5)
        if self.remote is not None:
            self.remote.check_room()
        principal = access.may_start()
        table = self.table
        agent, source = await self.threads.source_for(request, self.sources)
        run_id = request.run_id or f"run_{uuid.uuid4().hex}"
        taken = queued is None and (run_id in table or await self.journal.load_run(run_id))
        if taken:
            raise RunExists(run_id)
        table.reuse(run_id)
        # The shared queue's: a worker runs it (and takes its quota and thread then).
        shared = queued is None and self.shared is not None and self.shared.takes(request)
        # Room to run now, or a place in the queue (loop runs of a local journal; 429 past it).
        local = request.source == "loop" and self.remote is None
        goes = queued is not None or shared or self.queue.admit(local)
        if request.thread_id and request.thread_id != run_id:
            await self.threads.check(request.thread_id)
        tickets: list[access.Ticket] = []
        try:
            for admit in [] if shared else self.admission:
                if (ticket := await admit(principal)) is not None:
                    tickets.append(ticket)
            # The loop learns who asked from here only (whatever a client put there goes).
            request.principal = principal
            prepared = source.prepare(request)
            kept = await self.attachments.keep(run_id, input_messages(request))
            # Last, once nothing else can refuse the start: a claimed id stays taken.
            claims = bool(request.run_id) and queued is None
            if claims and self.remote is not None and not await self.remote.claim(run_id):
                raise RunExists(run_id)
            if queued is not None:
                assert self.remote is not None  # a shared queue's run: the journal is shared
                self.remote.adopt(run_id)  # a reader here may have loaded its view meanwhile
            elif run_id in table:
                raise RunExists(run_id)  # started here by another request while this one waited
            if request.exclusive and request.thread_id and not shared:
                await self.threads.claim(request.thread_id, run_id)
        except BaseException as exc:
            await access.refund(tickets)
            await self.attachments.refused(run_id, exc)
            raise
        now = queued.created_at if queued is not None else self.clock()
        named = agent.name if agent is not None else None
        record = start_record(request, run_id, principal, named, now)
        record.input = self.attachments.recorded(run_id, kept)
        if shared and self.shared is not None:
            return await self.shared.accept(request, record)
        run = Run(record)
        for ticket in tickets:
            ticket.bind(run)
        for observe in self.run_observers:
            observe(run)
        table.admit(run)
        table.active += 1
        table.started += 1
        self.journal.record_run(record)
        self.launch(run, self.queue.producer(self, run, source.producer(self, run, prepared), goes))
        # A created run survives a crash (its events may not have yet: they get their own
        # commits, and an ingest push is acknowledged only after its commit).
        await self.journal.flush()
        audit("run_started", principal, run_id=run_id, thread_id=record.thread_id)
        return msgspec.structs.replace(self.queue.info(run), input=input_messages(request))

    def launch(self, run: Run, producer: Producer) -> None:
        """Run the run's producer in the hub's task group (a start's, or a takeover's)."""
        run.producer = producer
        assert self._tg is not None
        self._tg.start_soon(self._produce, run, producer)

    async def _produce(self, run: Run, producer: Producer) -> None:
        try:
            await producer.run()
        except LimitReached:
            pass
        except Exception:
            # The exception's text stays in the server log; subscribers see a plain reason.
            log.exception("producer of run %s failed", run.id)
            self.end_producer(run, "producer_failed")
        finally:
            self.end_producer(run)
            # Done: what it holds (a loop's whole state) goes now, not with the run, later.
            run.producer = None

    async def get(self, run_id: str, *, attachments: bool = False) -> RunInfo:
        run = await self.visible(run_id)
        if self.shared is not None and run.remote:
            info = await self.shared.info(run)
        else:
            info = self.queue.info(run)
        return await self.attachments.resolve(info) if attachments else info

    async def list_runs(self, *, limit: int = 100, thread_id: str | None = None) -> list[RunInfo]:
        owner = access.owner_filter()
        infos = {
            r.id: self.queue.info(r)
            for r in self.table.runs()
            if (thread_id is None or r.record.thread_id == thread_id)
            and (owner is None or r.record.owner == owner)
        }
        for record in await self.journal.list_runs(limit, thread_id, owner):
            if record.id not in infos:
                infos[record.id] = self.loader.cold(record).info()
        return sorted(infos.values(), key=lambda i: i.created_at, reverse=True)[:limit]

    async def history(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Envelope]:
        run = await self.visible(run_id)
        start = max(after, 0)
        if run.pages is not None:
            return await self.journal.load_events(run_id, after=start, limit=limit)
        end = run.committed if limit is None else min(run.committed, start + limit)
        return run.envelopes(start, end)

    def subscribe(
        self, run_id: str, *, after: int = 0, consumer: str = "api"
    ) -> AbstractAsyncContextManager[RunSubscription]:
        return _subscription(self, run_id, after, consumer)

    # --- RunService: commands -----------------------------------------------------------

    async def cancel(self, run_id: str) -> CommandResult:
        return await self.commands.cancel(run_id)

    async def steer(self, run_id: str, content: str) -> CommandResult:
        return await self.commands.steer(run_id, content)

    async def respond(self, run_id: str, request_id: str, decision: str) -> CommandResult:
        return await self.commands.respond(run_id, request_id, decision)

    # --- RunService: external loops (gateway.hub.ingest) --------------------------------

    async def push(self, run_id: str, event: LoopEvent) -> Envelope:
        return await self.ingest.push(run_id, event)

    async def push_nowait(self, run_id: str, event: LoopEvent) -> Envelope:
        return await self.ingest.push_nowait(run_id, event)

    async def wait_committed(self, run_id: str, seq: int) -> None:
        await self.ingest.committed(await self.visible(run_id), seq)

    async def end_ingest(self, run_id: str) -> None:
        await self.ingest.end(run_id)

    def command_channel(
        self, run_id: str
    ) -> AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]:
        return self.ingest.command_channel(run_id)

    # --- RunService: threads and agents (gateway.hub.threads) ---------------------------

    async def release_thread(self, thread_id: str) -> None:
        await self.threads.release(thread_id)

    async def agents(self) -> list[AgentInfo]:
        return self.roster.infos() if self.roster is not None else []

    async def create_thread(
        self, thread_id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> ThreadInfo:
        return await self.threads.create(thread_id, metadata)

    async def get_thread(self, thread_id: str) -> ThreadInfo | None:
        return await self.threads.get(thread_id)

    async def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        return await self.journal.list_threads(limit, access.owner_filter())

    async def forget_thread(self, thread_id: str) -> bool:
        return await self.threads.forget(thread_id)

    # --- the instance ---------------------------------------------------------------------

    def readiness(self) -> list[str]:
        """Why this instance should be sent no new work now; none: it is ready (/readyz)."""
        reasons = ["shutting down"] if self._closing else []
        trouble = self.journal.trouble
        if trouble is not None:
            reasons.append(f"journal: {trouble}")
        return reasons

    def stats(self) -> HubStats:
        """Safe to call from another thread (a metrics exporter's): it only copies."""
        t = self.table
        subscribers = self.delivery.subscribers()
        return HubStats(t.active, t.started, t.accepted, subscribers, t.retained)

    def run(self, run_id: str) -> Run:
        """The in-memory run (for sources and tests); RunNotFound if not loaded."""
        run = self.table.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def visible(self, run_id: str, *, control: bool = False) -> Run:
        """The run, if the request's principal may see it (and control it, if asked)."""
        run = await self.load(run_id)
        access.check_run(run_id, run.record.owner, control=control)
        return run

    async def load(self, run_id: str) -> Run:
        """The run, in memory (loaded from the journal if need be), whoever asks."""
        return await self.loader.load(run_id)


@asynccontextmanager
async def _subscription(
    hub: Hub, run_id: str, after: int, consumer: str
) -> AsyncIterator[RunSubscription]:
    run = await hub.visible(run_id)
    async with hub.delivery.subscribe(run, after, consumer) as sub:
        yield sub
