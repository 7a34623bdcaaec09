"""The hub: runs, their journals, fan-out to subscribers, and commands back to producers."""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, NamedTuple, NoReturn, Protocol, cast

import anyio
import msgspec
from anyio.abc import TaskGroup

from ...contracts.agents import AgentInfo, UnknownAgent
from ...contracts.client_errors import ClientError
from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import Envelope, LoopEvent
from ...contracts.messages import Message
from ...contracts.ports import (
    MAX_TRACESTATE_CHARS,
    CommandResult,
    CutOff,
    LimitReached,
    RunExists,
    RunFinished,
    RunGone,
    RunInfo,
    RunNotFound,
    RunNotIngest,
    RunTooLarge,
    StartRun,
    ThreadBusy,
    ThreadExists,
    ThreadInfo,
    Unavailable,
)
from ...contracts.principal import Owner, current
from ..agents.table import Agent, Agents
from ..identity.audit import audit
from ..journal.base import EVENT_OVERHEAD_BYTES, Journal, RunRecord
from ..settings import Settings
from ..sources.ingest import IngestProducer
from . import access
from .remote import Remote
from .run import Producer, Run, RunSubscription, new_record

log = logging.getLogger("loopgate.hub")

# How often (in events) a run checks its subscribers' lag: cheap enough for the hot path,
# frequent enough that a stuck client is noticed long before memory matters.
LAG_CHECK_EVERY = 64
SWEEP_INTERVAL_S = 1.0
COMMAND_BUFFER = 64
# The least time a shutdown gives the commit of its runs' ends, should they have taken the
# whole grace to stop.
FINAL_COMMIT_S = 1.0
# A compacted run is held in chunks of about this many bytes of events (as the hub counts
# them; gateway.hub.compact says why), and compaction checkpoints after about as many: a big
# run, or a burst of small ones, does not stall the event loop while it is encoded (about a
# millisecond per chunk).
COMPACT_CHUNK_BYTES = 1 << 20
# A finished run whose events average more than this (as the hub counts them) is left as
# objects: they cost it under 1 % beyond its payloads, and encoding it all again only churns
# the allocator (measured: RSS 25-35 MiB higher under benchmarks/soak.py's 1.9 MiB events).
COMPACT_MAX_MEAN_BYTES = 64 << 10
_encode = msgspec.json.Encoder().encode


def input_messages(request: StartRun) -> list[Message]:
    if isinstance(request.input, str):
        return [Message(role="user", content=request.input)]
    return list(request.input or [])


class Source(Protocol):
    """Where a run's events come from (the reference loop, an external loop, a recording)."""

    def prepare(self, request: StartRun) -> Any:
        """Validate the request before the run exists; raise ValueError saying what is wrong."""
        ...

    def producer(self, hub: Hub, run: Run, prepared: Any) -> Producer: ...


# Called with a run right after it is created, before its first event (telemetry opens the
# run's span here, may add to its metadata, and may observe the run's events: Run.observers).
RunObserver = Callable[[Run], None]
# Called with a subscription and "open" / "close" (telemetry: delivery per adapter).
SubscriptionObserver = Callable[[RunSubscription, str], None]


class HubStats(NamedTuple):
    """What the hub holds right now, and what it has done since it started (metrics)."""

    active_runs: int
    runs_started: int
    events_accepted: int
    # consumer (the adapter: "sse", "agui", "acp", "rpc", …) → open subscriptions
    subscribers: dict[str, int]
    # event bytes held in memory, counted as max_retained_bytes counts them
    retained_bytes: int = 0


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
        # The agents behind the ``loop`` source (a run names one, or gets the default): their
        # loops are started and closed with the hub. Without a roster, ``loop`` is a source
        # like the others.
        self.roster = roster
        self.journal = journal
        self.sources = dict(sources)
        self.clock = clock
        self.run_observers: list[RunObserver] = []
        # Checks every start passes first (quotas), in order.
        self.admission: list[access.Admission] = []
        self.subscription_observers: list[SubscriptionObserver] = []
        # Tasks that live as long as the hub does, started when it is entered.
        self.services: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._runs: dict[str, Run] = {}
        # Finished runs holding events in memory, oldest end first: the first to leave.
        self._hot_finished: dict[str, Run] = {}
        # Ids of runs dropped for good (they answer 410, not 404), oldest first; bounded.
        # Dropped runs: why, and whose (someone else's gone run is not found, as any other).
        self._gone: dict[str, tuple[str, Owner | None]] = {}
        self._retained = 0
        self._durable = journal.durable
        journal.on_commit = self._committed
        # A journal other instances share (Redis): their runs are served here too, as remote
        # views (gateway.hub.remote), and commands to them go to their owners.
        self._remote = Remote(self, journal.cluster) if journal.cluster is not None else None
        self._active = 0
        self._started = 0
        self._accepted = 0
        self._tg: TaskGroup | None = None
        self._closing = False
        # Runs with events their waiting subscribers have not been woken for (insertion order:
        # woken in the order they were published to), and what wakes the delivery task.
        self._window = settings.delivery_window_s
        self._dirty: dict[Run, None] = {}
        self._woken: anyio.Event | None = None
        # Finished runs whose terminal event is committed, waiting to be compacted.
        self._to_compact: deque[Run] = deque()
        self._compact_wanted = anyio.Event()
        self._compacted_since_checkpoint = 0
        # Requests waiting for a commit to acknowledge (a push): a drain that gives up on the
        # journal ends their wait, as a retry-later, rather than leave them to the server's
        # shutdown (a 500).
        self._committing: set[anyio.CancelScope] = set()
        # Threads held by an exclusive run of this hub while it goes: thread → run.
        self._thread_runs: dict[str, str] = {}

    # --- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Hub:
        interrupted = await self.journal.open()
        for record in interrupted:
            # A previous process died with these runs open: give them their terminal event.
            # Its seq follows the last committed one, and no client saw more than that.
            run = await self._load_hot(record)
            self._active += 1
            self.publish(run, "completion", {"status": "failed", "reason": "server_restarted"})
            await self.journal.flush()
            # One at a time, then read back from the journal like any finished run: however
            # many were open, a restart never holds more than one of them in memory.
            self._drop(run, None)
        await self.journal.flush()
        if self.roster is not None:
            await self.roster.start()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.journal.writer)
        self._tg.start_soon(self._housekeeping)
        self._tg.start_soon(self._deliver)
        self._tg.start_soon(self._watch)
        self._tg.start_soon(self._compactor)
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

    async def drain(self) -> None:
        """Graceful shutdown: ask producers to stop, then end whatever is still running."""
        if self._closing:
            return
        self._closing = True
        # Not the views of other instances' runs: those go on without this one.
        running = [r for r in self._runs.values() if not r.finished and not r.remote]
        for run in running:
            if run.record.source == "ingest":
                # The external loop lives on; only this gateway's view of the run ends.
                self.publish(run, "completion", {"status": "failed", "reason": "server_shutdown"})
            elif run.producer is not None:
                run.producer.cancel()
        grace = self.settings.shutdown_grace_s
        deadline = anyio.current_time() + grace
        with anyio.CancelScope(deadline=deadline):
            for run in running:
                await run.ended.wait()
        for run in running:
            if not run.finished:
                self.publish(run, "completion", {"status": "failed", "reason": "server_shutdown"})
        # The runs' ends are committed within what is left of the grace (at least a moment,
        # which a journal that answers takes milliseconds of): one that does not answer (Redis
        # down) would retry forever, holding the process past any grace.
        last = max(deadline, anyio.current_time() + FINAL_COMMIT_S)
        with anyio.CancelScope(shield=True, deadline=last):
            await self.journal.flush()
        stuck = [run for run in running if run.committed < run.last_seq]
        if stuck:
            log.error(
                "shutdown: the journal could not commit the end of %d run(s) within "
                "shutdown_grace_s (%g s); exiting without it: their streams here end, and a "
                "shared journal's other instances end the runs once this one's lease lapses",
                len(stuck),
                grace,
            )
            for run in stuck:
                for sub in list(run.subscribers):
                    sub.cut()
            for waiting in self._committing:
                waiting.cancel()

    async def _deliver(self) -> None:
        """Wake the subscribers of runs with new events, all together once per window: one
        timer for the whole hub, and a write per window per subscriber, not per event."""
        while True:
            if not self._dirty:
                self._woken = anyio.Event()
                await self._woken.wait()
                self._woken = None
            await anyio.sleep(self._window)
            dirty, self._dirty = self._dirty, {}
            for run in dirty:
                run.notify()

    async def _watch(self) -> None:
        """The subscribers' deadlines, a tick at a time: a write past its deadline cuts its
        subscriber off; a wait past its deadline wakes its run's waiters (keep-alives)."""
        s = self.settings
        tick = min(SWEEP_INTERVAL_S, s.keepalive_s / 4, s.write_timeout_s / 4)
        while True:
            await anyio.sleep(tick)
            now = anyio.current_time()
            for run in self._runs.values():
                wake = False
                for sub in run.subscribers:
                    if sub.write_deadline is not None and now >= sub.write_deadline:
                        sub.cut()
                    elif sub.wait_deadline is not None and now >= sub.wait_deadline:
                        wake = True
                if wake:
                    run.notify()

    async def _housekeeping(self) -> None:
        while True:
            await anyio.sleep(SWEEP_INTERVAL_S)
            try:
                await self._sweep()
            except Exception:
                log.exception("journal housekeeping failed; retrying")

    async def _sweep(self) -> None:
        s = self.settings
        if self._remote is not None:
            self._remote.sweep()
        cutoff = self.clock() - int(s.max_run_age_s * 1e9)
        finished = [r for r in self._runs.values() if r.finished and not r.subscribers]
        finished.sort(key=lambda r: r.record.finished_at or 0)
        keep = s.max_runs if not self._durable else min(s.max_runs, s.cache_runs)
        excess = len(finished) - keep
        for i, run in enumerate(finished):
            old = (run.record.finished_at or 0) < cutoff
            if (i < excess or old) and run.visible_seq >= run.last_seq:
                # A durable journal still has the run (until it prunes it, below).
                why = f"max_run_age_s ({s.max_run_age_s:g} s)" if old else f"max_runs ({keep})"
                self._drop(run, None if self._durable else why)
        doomed = await self.journal.prune(keep=s.max_runs, older_than_ns=cutoff)
        for run_id in doomed:
            gone = self._runs.get(run_id)
            if gone is not None and gone.finished and not gone.subscribers:
                self._drop(gone, None)
            owner = gone.record.owner if gone is not None else None
            self._remember_gone(run_id, "retention (max_runs, max_run_age_s)", owner)

    # --- memory -------------------------------------------------------------------------

    def _admit(self, run: Run) -> None:
        self._runs[run.id] = run
        self._retained += run.retained
        if run.finished and run.retained:
            self._hot_finished[run.id] = run

    def _drop(self, run: Run, gone: str | None) -> None:
        """Let go of a finished run's memory; ``gone`` says why it is gone for good (410)."""
        if self._runs.get(run.id) is run:
            del self._runs[run.id]
            self._retained -= run.retained
        self._hot_finished.pop(run.id, None)
        run.release()
        if gone is not None:
            self._remember_gone(run.id, gone, run.record.owner)

    def _remember_gone(self, run_id: str, why: str, owner: Owner | None) -> None:
        self._gone.pop(run_id, None)
        self._gone[run_id] = (why, owner)
        while len(self._gone) > self.settings.max_dropped_ids:
            del self._gone[next(iter(self._gone))]

    def _make_room(self, needed: int) -> bool:
        """Drop finished runs, oldest first, until ``needed`` more bytes fit the total."""
        limit = self.settings.max_retained_bytes
        if self._retained + needed <= limit:
            return True
        why = f"max_retained_bytes ({limit} bytes of events in memory)"
        for run in list(self._hot_finished.values()):
            # Watched runs stay until their readers are done; a durable run waits for its
            # last commit (it is read back from the journal once it is out of memory).
            if run.subscribers or run.visible_seq < run.last_seq:
                continue
            self._drop(run, None if self._durable else why)
            if self._retained + needed <= limit:
                return True
        return False

    def _committed(self, marks: Mapping[str, int]) -> None:
        """The journal committed these runs' events up to these seqs: show them."""
        runs = self._runs
        for run_id, seq in marks.items():
            run = runs.get(run_id)
            if run is not None and seq > run.committed:
                run.committed = seq
                run.notify()
                if run.finished and seq >= run.last_seq:
                    self._compact_later(run)

    # --- compaction ---------------------------------------------------------------------

    def _compact_later(self, run: Run) -> None:
        """A finished run whose every event is committed: nothing changes it any more."""
        if self._runs.get(run.id) is run and run.compact is None:
            self._to_compact.append(run)
            self._compact_wanted.set()

    async def _compactor(self) -> None:
        ended = anyio.Event()  # what every compacted run's ``ended`` is: set for good
        ended.set()
        while True:
            await self._compact_wanted.wait()
            self._compact_wanted = anyio.Event()
            while self._to_compact:
                run = self._to_compact.popleft()
                try:
                    await self._compact(run, ended)
                except Exception:
                    # Each step leaves the run whole, part objects, part compacted: it is
                    # served as it is, only bigger than it could be.
                    log.exception("compacting run %s failed; it stays as it is", run.id)
            self._compacted_since_checkpoint = 0

    async def _compact(self, run: Run, ended: anyio.Event) -> None:
        """Re-home a finished run's events into a few bytes objects (gateway.hub.compact), a
        chunk at a time from the first; each chunk's objects go as soon as it is encoded, so
        compacting a run never holds it twice. Readers go on meanwhile: a subscriber's cursor
        means the same seq in both forms."""
        ends = run.ends
        if run.retained > COMPACT_MAX_MEAN_BYTES * len(run.hot):
            run.settle(ended)
            return
        while run.hot:
            if self._runs.get(run.id) is not run:
                return  # dropped since (meanwhile, or before its turn came)
            first = run.hot_base
            self._retained += run.compact_chunk(COMPACT_CHUNK_BYTES)
            done = ends[run.hot_base - 1] - (ends[first - 1] if first else 0)
            self._compacted_since_checkpoint += done
            if self._compacted_since_checkpoint >= COMPACT_CHUNK_BYTES:
                self._compacted_since_checkpoint = 0
                await anyio.lowlevel.checkpoint()
        if self._runs.get(run.id) is run and run.compact is not None:
            self._retained += run.compacted(ended)

    # --- the producer side (hot path) ---------------------------------------------------

    def publish(
        self, run: Run, kind: str, data: dict[str, Any], encoded: bytes | None = None
    ) -> Envelope:
        """Append one event to the run's journal and wake its subscribers. Never blocks.

        ``encoded`` is ``data`` already encoded, if the caller has it. With a durable journal
        subscribers are woken when the event is committed, not here."""
        if run.finished:
            raise RunFinished(run.id, run.record.status)
        s = self.settings
        seq = len(run.hot) + 1
        terminal = kind == "completion" and is_terminal_completion(kind, data)
        if encoded is None:
            encoded = _encode(data)
        size = len(encoded) + EVENT_OVERHEAD_BYTES
        retained = run.retained + size
        # The terminal event always fits (it is small), so even a runaway run ends cleanly.
        if not terminal and (
            seq >= s.max_events_per_run
            or retained > s.max_run_retained_bytes
            or self._retained + size > s.max_retained_bytes
        ):
            self._admit_or_end(run, seq, size)
        env = Envelope(run.id, seq, self.clock(), kind, data)
        run.hot.append(env)
        run.retained = retained
        run.ends.append(retained)
        self._retained += size
        self._accepted += 1
        if self._durable:
            self.journal.record_event(env, encoded)
        else:
            run.committed = seq
        if terminal:
            # Before the observers see the terminal event: they may want the run's end first.
            self._finish(run, data.get("status"))
        # Only the kinds the run's observers asked for: most events (deltas) are not.
        if kind in run.observed:
            for observe in run.observers:
                observe(env)
        if not terminal and not seq % LAG_CHECK_EVERY and run.subscribers:
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
        if not self._durable:
            self.wake(run, terminal)
        return env

    def wake(self, run: Run, now: bool = False) -> None:
        """Wake the run's waiting subscribers: ``now``, or with the next delivery window."""
        if now or not self._window:
            run.notify()
        elif run.has_waiters and run not in self._dirty:
            self._dirty[run] = None
            if self._woken is not None:
                self._woken.set()

    def _admit_or_end(self, run: Run, seq: int, size: int) -> None:
        """An event past a bound: room is made for it by dropping finished runs, or the run
        ends (RunTooLarge)."""
        s = self.settings
        if seq >= s.max_events_per_run:
            limit = s.max_events_per_run
            self._end_too_large(run, "event_limit", f"the limit of {limit} events")
        if run.retained + size > s.max_run_retained_bytes:
            limit = s.max_run_retained_bytes
            self._end_too_large(
                run, "memory_limit", f"the limit of {limit} bytes of events held for one run"
            )
        if not self._make_room(size):
            limit = s.max_retained_bytes
            self._end_too_large(
                run,
                "memory_limit",
                f"the gateway's limit of {limit} bytes of events held in memory, "
                "with every finished run already dropped",
            )

    def _end_too_large(self, run: Run, reason: str, limit: str) -> NoReturn:
        message = f"run {run.id} reached {limit}"
        self.publish(run, "completion", {"status": "failed", "reason": reason, "message": message})
        raise RunTooLarge(f"{message}; it has been ended")

    def release_thread_claim(self, run: Run) -> None:
        """The run has ended: its thread is free for the next (a shared journal frees it in
        Redis with the commit of the run's end)."""
        if self._thread_runs.get(run.record.thread_id) == run.id:
            del self._thread_runs[run.record.thread_id]

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
        self._active -= 1
        self.release_thread_claim(run)
        if self._runs.get(run.id) is run:
            self._hot_finished[run.id] = run
        for hook in run.on_finish:
            hook(run)
        self.journal.record_run(record)
        run.ended.set()
        if run.committed >= run.last_seq:
            self._compact_later(run)

    # --- RunService ---------------------------------------------------------------------

    async def start(self, request: StartRun) -> RunInfo:
        if self._closing:
            raise LimitReached("the server is shutting down", retry_after=5)
        if self._remote is not None:
            self._remote.check_room()
        principal = access.may_start()
        agent: Agent | None = None
        if request.source == "loop" and self.roster is not None:
            agent = await self._agent_for(request)
            # A LoopSource is a Source; pyright, meeting this module under two names (the
            # loopgate.* links), takes their Hubs for two types (issue 32).
            source: Source | None = cast(Source, agent.source)
        else:
            source = self.sources.get(request.source)
        if source is None:
            raise ClientError(f"unknown source {request.source!r}")
        run_id = request.run_id or f"run_{uuid.uuid4().hex}"
        if run_id in self._runs or await self.journal.load_run(run_id) is not None:
            raise RunExists(run_id)
        self._gone.pop(run_id, None)
        if self._active >= self.settings.max_active_runs:
            raise LimitReached(
                f"too many active runs (limit {self.settings.max_active_runs}); retry later"
            )
        if request.thread_id and request.thread_id != run_id:
            await self._check_thread(request.thread_id)
        tickets: list[access.Ticket] = []
        try:
            for admit in self.admission:
                if (ticket := await admit(principal)) is not None:
                    tickets.append(ticket)
            # The loop learns who asked from here only: whatever a client put in the request
            # goes.
            request.principal = principal
            prepared = source.prepare(request)
            # Last, once nothing else can refuse the start: a claimed id stays taken.
            if request.run_id and self._remote is not None and not await self._remote.claim(run_id):
                raise RunExists(run_id)
            if run_id in self._runs:
                raise RunExists(run_id)  # started here by another request while this one waited
            if request.exclusive and request.thread_id:
                await self._claim_thread(request.thread_id, run_id)
        except BaseException:
            await access.refund(tickets)
            raise
        metadata = dict(request.metadata)
        if request.traceparent:
            metadata.setdefault("traceparent", request.traceparent)
            # W3C: at most 32 members of 256 characters; a longer one is dropped, not cut.
            if request.tracestate and len(request.tracestate) <= MAX_TRACESTATE_CHARS:
                metadata.setdefault("tracestate", request.tracestate)
        record = new_record(
            run_id, request.thread_id or run_id, request.source, self.clock(), metadata
        )
        record.input = input_messages(request)
        record.owner = principal.owner
        record.agent = agent.name if agent is not None else None
        run = Run(record)
        for ticket in tickets:
            ticket.bind(run)
        for observe in self.run_observers:
            observe(run)
        self._admit(run)
        self._active += 1
        self._started += 1
        self.journal.record_run(record)
        run.producer = source.producer(self, run, prepared)
        assert self._tg is not None
        self._tg.start_soon(self._produce, run, run.producer)
        # A created run survives a crash (its events may not have yet: they get their own
        # commits, and an ingest push is acknowledged only after its commit).
        await self.journal.flush()
        audit("run_started", principal, run_id=run_id, thread_id=record.thread_id)
        return run.info()

    async def _claim_thread(self, thread_id: str, run_id: str) -> None:
        """The thread, for this run alone until it ends (``StartRun.exclusive``); ThreadBusy
        while another such run holds it, here or (a shared journal) on any instance."""
        holder = self._thread_runs.get(thread_id)
        if holder is None and self._remote is not None:
            holder = await self._remote.claim_thread(thread_id, run_id)
        if holder is not None:
            raise ThreadBusy(thread_id, holder)
        self._thread_runs[thread_id] = run_id

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
            # Done: what it holds (a loop's whole state, for one) goes with it, not with the
            # run, which stays in memory long after.
            run.producer = None

    async def get(self, run_id: str) -> RunInfo:
        return (await self._visible(run_id)).info()

    async def list_runs(self, *, limit: int = 100, thread_id: str | None = None) -> list[RunInfo]:
        owner = access.owner_filter()
        infos = {
            r.id: r.info()
            for r in self._runs.values()
            if (thread_id is None or r.record.thread_id == thread_id)
            and (owner is None or r.record.owner == owner)
        }
        for record in await self.journal.list_runs(limit, thread_id, owner):
            if record.id not in infos:
                infos[record.id] = self._cold(record).info()
        return sorted(infos.values(), key=lambda i: i.created_at, reverse=True)[:limit]

    async def cancel(self, run_id: str) -> CommandResult:
        async def cancel(producer: Producer) -> str | None:
            producer.cancel()
            return None

        return await self._command(
            run_id, "cancel", cancel, "cancellation requested", {"verb": "cancel"}
        )

    async def steer(self, run_id: str, content: str) -> CommandResult:
        return await self._command(
            run_id,
            "steer",
            lambda producer: producer.steer(content),
            "steering message delivered; the loop applies it at its next step",
            {"verb": "steer", "content": content},
        )

    async def respond(self, run_id: str, request_id: str, decision: str) -> CommandResult:
        async def answer(producer: Producer) -> str | None:
            return producer.respond(request_id, decision)

        return await self._command(
            run_id,
            "answer",
            answer,
            f"{decision} recorded",
            {"verb": "respond", "request_id": request_id, "decision": decision},
        )

    async def _command(
        self,
        run_id: str,
        verb: str,
        apply: Callable[[Producer], Awaitable[str | None]],
        accepted: str,
        remote: dict[str, Any],
    ) -> CommandResult:
        """A command to a live run's producer; on a finished run it is a no-op, not an error.

        ``apply`` returns a refusal (a reason) or None when the producer took the command;
        ``remote`` is the command as sent to the instance that owns a remote run.
        """
        run = await self._load(run_id)
        principal = access.check_run(run_id, run.record.owner, control=True)
        audit(f"run_{verb}", principal, run_id=run_id)
        if run.remote and not run.finished and self._remote is not None:
            return await self._remote.command(run, verb, remote)
        if run.finished or run.producer is None:
            detail = f"run already finished ({run.record.status}); nothing to {verb}"
            return CommandResult(run_id=run_id, accepted=False, detail=detail)
        refusal = await apply(run.producer)
        return CommandResult(run_id=run_id, accepted=refusal is None, detail=refusal or accepted)

    async def push(self, run_id: str, event: LoopEvent) -> Envelope:
        env = await self.push_nowait(run_id, event)
        await self._wait_committed(self._runs.get(run_id), env.seq)
        return env

    async def push_nowait(self, run_id: str, event: LoopEvent) -> Envelope:
        run = await self._visible(run_id, control=True)
        if self._remote is not None and not run.finished:
            self._remote.check_room()
        if run.remote and not run.finished and self._remote is not None:
            # The owner appends (one writer per run): it answers once the event is committed.
            return await self._remote.push(run, event)
        if run.record.source != "ingest":
            raise RunNotIngest(f"run {run_id!r} is produced by its {run.record.source} source")
        if run.finished:
            raise RunFinished(run_id, run.record.status)
        run.last_push_ns = self.clock()
        # Loop runs are bounded by their own limits (previews, not whole results); what an
        # external loop pushes is bounded here, by its encoded size.
        encoded = _encode(event.data)
        run.ingested_bytes += len(encoded)
        if run.ingested_bytes > self.settings.max_run_bytes:
            limit = self.settings.max_run_bytes
            self._end_too_large(run, "byte_limit", f"the limit of {limit} bytes of events")
        return self.publish(run, event.kind, event.data, encoded)

    async def wait_committed(self, run_id: str, seq: int) -> None:
        await self._wait_committed(await self._visible(run_id), seq)

    async def _wait_committed(self, run: Run | None, seq: int) -> None:
        if run is not None and run.remote:
            return  # its owner answered each push once it was committed
        if run is None or run.committed < seq:
            # Everything recorded before this call is committed when it returns (the
            # writer's group commit, or this call's own if the writer is busy or gone).
            with anyio.CancelScope() as waiting:
                self._committing.add(waiting)
                try:
                    await self.journal.flush()
                finally:
                    self._committing.discard(waiting)
            if waiting.cancelled_caught:
                # The drain gave up on the journal (Redis away): this is not acknowledged.
                raise Unavailable(
                    "the gateway is shutting down and could not commit this; retry shortly",
                    retry_after=1,
                )
            if run is not None and run.committed < seq and self._remote is not None:
                # Refused by a shared journal: another instance ended the run meanwhile.
                raise RunFinished(run.id, run.record.status)

    async def end_ingest(self, run_id: str) -> None:
        run = await self._visible(run_id, control=True)
        if run.remote and not run.finished and self._remote is not None:
            await self._remote.end_ingest(run)
            return
        if run.record.source != "ingest":
            raise RunNotIngest(f"run {run_id!r} is produced by its {run.record.source} source")
        self.end_producer(run)
        await self._wait_committed(run, run.last_seq)

    @asynccontextmanager
    async def command_channel(self, run_id: str) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        run = await self._visible(run_id, control=True)
        if run.record.source != "ingest":
            raise RunNotIngest(f"run {run_id!r} is produced by its {run.record.source} source")
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

    async def release_thread(self, thread_id: str) -> None:
        await self._check_thread(thread_id)
        if self.roster is not None:
            await self.roster.release_thread(thread_id)

    async def agents(self) -> list[AgentInfo]:
        return self.roster.infos() if self.roster is not None else []

    async def _agent_for(self, request: StartRun) -> Agent:
        """The agent a loop run goes to: the one it names; else, where a continued thread has
        runs, the agent of its newest one (a thread stays with its agent); else the default."""
        assert self.roster is not None
        name, roster = request.agent, self.roster
        # A gateway serving the one agent its flags define has nothing to look up.
        chooses = roster.several or roster.default.declared
        if name is None and chooses and request.thread_id:
            newest = await self._newest_of_thread(request.thread_id)
            if newest is not None and newest.agent is not None:
                name = newest.agent
                if roster.get(name) is None:
                    raise UnknownAgent(
                        name,
                        roster.names(),
                        f"thread {request.thread_id!r} was with agent {name!r}, which this "
                        f"gateway no longer serves; name one of: {', '.join(roster.names())}",
                    )
        agent = roster.resolve(name)
        request.agent = agent.name
        return agent

    async def create_thread(
        self, thread_id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> ThreadInfo:
        principal = access.may_start()
        thread_id = thread_id or f"thread_{uuid.uuid4().hex}"
        if await self.journal.load_thread(thread_id) is not None:
            raise ThreadExists(thread_id)
        await self._check_thread(thread_id)  # someone else's runs may name it already
        thread = ThreadInfo(
            id=thread_id,
            created_at=self.clock(),
            metadata=dict(metadata or {}),
            owner=principal.owner,
        )
        self.journal.record_thread(thread)
        # Recorded means committed, as a started run is: another process may look it up next.
        await self.journal.flush()
        # Thread records live under the runs' retention (a thread with runs is found through
        # them anyway); bounded here, as each comes in, so none waits for the sweep.
        s = self.settings
        await self.journal.prune_threads(
            keep=s.max_runs, older_than_ns=self.clock() - int(s.max_run_age_s * 1e9)
        )
        return thread

    async def get_thread(self, thread_id: str) -> ThreadInfo | None:
        thread = await self.journal.load_thread(thread_id)
        if thread is None or not current().sees(thread.owner):
            return None
        return thread

    async def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        return await self.journal.list_threads(limit, access.owner_filter())

    async def forget_thread(self, thread_id: str) -> bool:
        if await self.get_thread(thread_id) is None:
            return False
        return await self.journal.forget_thread(thread_id)

    async def history(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Envelope]:
        run = await self._visible(run_id)
        start = max(after, 0)
        if run.pages is not None:
            return await self.journal.load_events(run_id, after=start, limit=limit)
        end = run.committed if limit is None else min(run.committed, start + limit)
        return run.envelopes(start, end)

    @asynccontextmanager
    async def subscribe(
        self, run_id: str, *, after: int = 0, consumer: str = "api"
    ) -> AsyncIterator[RunSubscription]:
        run = await self._visible(run_id)
        if len(run.subscribers) >= self.settings.max_subscribers_per_run:
            raise LimitReached(
                f"run {run_id} has the maximum of {self.settings.max_subscribers_per_run} "
                "subscribers"
            )
        sub = RunSubscription(
            run,
            after,
            self.settings.subscriber_max_lag,
            self.settings.max_batch,
            consumer,
            max_batch_bytes=self.settings.max_batch_bytes,
        )
        run.subscribers.add(sub)
        for observe in self.subscription_observers:
            observe(sub, "open")
        try:
            with anyio.CancelScope() as scope:
                sub.scope = scope
                yield sub
        finally:
            run.subscribers.discard(sub)
            for observe in self.subscription_observers:
                observe(sub, "close")
        if sub.cut_off and scope.cancelled_caught:
            raise CutOff(sub.cursor)

    # --- helpers ------------------------------------------------------------------------

    def readiness(self) -> list[str]:
        """Why this instance should be sent no new work now; none: it is ready (/readyz)."""
        reasons = ["shutting down"] if self._closing else []
        trouble = self.journal.trouble
        if trouble is not None:
            reasons.append(f"journal: {trouble}")
        return reasons

    def stats(self) -> HubStats:
        """Safe to call from another thread (a metrics exporter's): it only copies."""
        subscribers: dict[str, int] = {}
        for run in list(self._runs.values()):
            for sub in list(run.subscribers):
                subscribers[sub.consumer] = subscribers.get(sub.consumer, 0) + 1
        return HubStats(self._active, self._started, self._accepted, subscribers, self._retained)

    def run(self, run_id: str) -> Run:
        """The in-memory run (for sources and tests); RunNotFound if not loaded."""
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFound(run_id) from None

    async def _visible(self, run_id: str, *, control: bool = False) -> Run:
        """The run, if the request's principal may see it (and control it, if asked)."""
        run = await self._load(run_id)
        access.check_run(run_id, run.record.owner, control=control)
        return run

    async def _check_thread(self, thread_id: str) -> None:
        """ThreadNotFound when the thread is someone else's: its record's owner, else its
        newest run's (a thread exists as soon as a run names it)."""
        if access.owner_filter() is None:
            return  # an admin's: every thread is
        thread = await self.journal.load_thread(thread_id)
        if thread is not None:
            access.check_thread(thread_id, thread.owner)
            return
        newest = await self._newest_of_thread(thread_id)
        if newest is not None:
            access.check_thread(thread_id, newest.owner)

    async def _newest_of_thread(self, thread_id: str) -> RunRecord | None:
        """The record of the thread's newest run: in memory (a memory journal keeps none) or
        in the journal."""
        newest = [r.record for r in self._runs.values() if r.record.thread_id == thread_id]
        newest += await self.journal.list_runs(1, thread_id)
        return max(newest, key=lambda r: r.created_at) if newest else None

    async def _load(self, run_id: str) -> Run:
        run = self._runs.get(run_id)
        if run is not None:
            return run
        record = await self.journal.load_run(run_id)
        if record is None:
            gone = self._gone.get(run_id)
            if gone is not None and current().sees(gone[1]):
                raise RunGone(run_id, gone[0])
            raise RunNotFound(run_id)
        run = self._runs.get(run_id)  # loaded by someone else meanwhile
        if run is not None:
            return run
        record = msgspec.structs.replace(record)
        if record.state == "finished":
            # Served from the journal page by page: a finished run is never loaded whole.
            run = self._cold(record)
            self._admit(run)
            return run
        if self._remote is not None:
            return await self._remote.load(record)
        return await self._load_hot(record)

    def _cold(self, record: RunRecord) -> Run:
        return Run(record, pages=partial(self._page, record.id))

    async def _page(self, run_id: str, after: int, limit: int, max_bytes: int) -> list[Envelope]:
        return await self.journal.load_events(run_id, after=after, limit=limit, max_bytes=max_bytes)

    async def _load_hot(self, record: RunRecord) -> Run:
        """A running run from the journal (one a previous process left open), in memory."""
        events = await self.journal.load_events(record.id)
        sizes = [len(_encode(e.data)) + EVENT_OVERHEAD_BYTES for e in events]
        run = Run(record, events, sizes)
        self._admit(run)
        return run
