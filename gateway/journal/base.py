"""The durable tier of the journal, and what a journal several instances share adds.

The hub keeps the events of the runs it holds in memory (the hot journal: appends are a list
append, catch-up is a slice). A ``Journal`` makes runs outlive the process and the hub's memory:
``record_*`` never block the producer; ``flush`` returns once everything recorded before it is
committed; ``writer`` commits in the background (group commit, gateway.journal.group_commit)
and reports each commit through ``on_commit``, so the hub can show subscribers only what a
crash cannot take back.

A journal is storage. One that other gateway instances share (Redis) also has a ``cluster``:
which instance owns each running run, the commands and pushes sent on to owners, and views of
runs another instance owns. A local journal's ``cluster`` is None, and the hub serves only its
own runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

import msgspec

from ...contracts.envelope import Envelope
from ...contracts.messages import Message
from ...contracts.ports import RunSource, RunState, ThreadInfo
from ...contracts.principal import Owner
from .blobs import BlobStore

# What one event of a running run costs beyond its encoded payload: the Envelope, its data
# dict, the ints and strings in them, the list slot and the byte-offset slot. Measured with
# tracemalloc on decoded ingest events: 431 bytes for a content_delta, 508 for a 4 KB tool
# result, 681 for a tool call with nested arguments. A finished run, once compacted
# (gateway.hub.compact), counts what it then holds: its envelopes' JSON and 5 bytes each.
EVENT_OVERHEAD_BYTES = 512

# --journal values served by the Redis journal (gateway.journal.redis_connect): named here,
# where nothing imports the optional Redis client.
REDIS_SCHEMES = ("redis://", "rediss://", "redis+sentinel://")
# --journal values served by the PostgreSQL journal (gateway.journal.postgres).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

# A commit's news: run id -> the highest seq of that run now committed.
CommitListener = Callable[[Mapping[str, int]], None]
# A followed run's new events, in seq order, as soon as its owner committed them, and the
# size of each one's encoded payload (what the hub counts it as: it is the owner's encoding).
Deliver = Callable[[list[Envelope], list[int]], None]
# A command for a run's owner ({"verb", "run_id", …}) → its answer; None: no such run here.
CommandHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]
# Another instance appended to a run this one owns (its view here is stale).
LostListener = Callable[[str], None]
# This instance ended a run for an owner that could not (lost, unreachable, or a previous
# process): its id and the terminal event's reason.
EndedListener = Callable[[str, str], None]


# What becomes of a lost instance's run: resumed here, left for another instance to resume
# (this one takes no runs: an API-only instance), or ended ``owner_lost``.
Verdict = Literal["resume", "leave", "end"]


class Adopter(Protocol):
    """Who takes over the runs of a lost instance here (gateway.hub.takeover)."""

    def judge(self, record: RunRecord) -> Verdict:
        """Whether this instance resumes the run (its loop resumes, attempts are left, this
        instance takes runs)."""
        ...

    async def resume(self, record: RunRecord) -> None:
        """Run it again here: its ownership is this instance's already (``record.attempt``
        is the new attempt's)."""
        ...


class RunRecord(msgspec.Struct, kw_only=True):
    id: str
    thread_id: str
    source: RunSource
    state: RunState
    status: str | None
    created_at: int
    finished_at: int | None = None
    last_seq: int = 0
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    input: list[Message] = msgspec.field(default_factory=list)
    # Who started it; None for runs recorded before owners were kept (the admin's only).
    owner: Owner | None = None
    # The agent that ran it (``loop`` runs only).
    agent: str | None = None
    # Where its final state is POSTed once it ends (gateway/run_webhooks.py); kept with the
    # record, never shown in RunInfo (its path or query may carry the receiver's secret).
    webhook: str | None = None
    # Which attempt at the run this is: a survivor that takes over a lost instance's run
    # resumes it as the next one (gateway.hub.takeover).
    attempt: int = 1
    # The loop request a survivor resumes the run with, when its loop can resume (a shared
    # journal's runs only); None: it ends ``owner_lost`` with its instance.
    resume: dict[str, Any] | None = None


class Journal(Protocol):
    # True when what ``flush`` commits survives the process (the hub then waits for commits
    # before it acknowledges pushes or shows events to subscribers).
    durable: bool
    on_commit: CommitListener | None

    @property
    def blobs(self) -> BlobStore:
        """Attachments' bytes, once each (gateway.journal.blobs); ``delete`` drops those of
        the runs it deletes that no other run refers to."""
        ...

    @property
    def cluster(self) -> Cluster | None:
        """The instances this journal is shared with; None for a journal of this process."""
        ...

    @property
    def trouble(self) -> str | None:
        """Why the journal cannot keep up right now (a full or unreachable Redis), for
        readiness; None while it can."""
        ...

    async def open(self) -> list[RunRecord]:
        """Prepare storage; return runs left ``running`` by a previous process."""
        ...

    def record_run(self, record: RunRecord) -> None: ...

    def record_event(self, envelope: Envelope, data: bytes) -> None:
        """``data`` is the payload already encoded (the hub encodes it once, to count it)."""
        ...

    async def writer(self) -> None:
        """Commit whatever is recorded, as soon as the previous commit is done; forever."""
        ...

    async def flush(self) -> None:
        """Return once everything recorded before the call is committed."""
        ...

    async def load_run(self, run_id: str) -> RunRecord | None: ...

    async def load_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> list[Envelope]:
        """Committed events after seq ``after``; at most ``limit`` of them and, beyond the
        first, at most ``max_bytes`` counted as the hub counts them."""
        ...

    async def list_runs(
        self, limit: int, thread_id: str | None = None, owner: Owner | None = None
    ) -> list[RunRecord]:
        """Newest first; only ``owner``'s when given (up to ``limit`` of them)."""
        ...

    async def delete(self, run_ids: list[str]) -> None: ...

    def record_thread(self, thread: ThreadInfo) -> None:
        """Keep a thread's record (a durable journal: queued for the next commit, as a run's)."""
        ...

    async def load_thread(self, thread_id: str) -> ThreadInfo | None: ...

    async def list_threads(self, limit: int, owner: Owner | None = None) -> list[ThreadInfo]:
        """Newest first; only ``owner``'s when given (up to ``limit`` of them)."""
        ...

    async def forget_thread(self, thread_id: str) -> bool:
        """Drop a thread's record (committed when this returns); False if there was none."""
        ...

    async def prune_threads(self, *, keep: int, older_than_ns: int) -> None:
        """Drop thread records beyond the newest ``keep`` or created before ``older_than_ns``
        (only what is committed: the hub flushes first)."""
        ...

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        """Drop finished runs beyond ``keep`` or finished before ``older_than_ns``."""
        ...

    async def aclose(self) -> None: ...


class Cluster(Protocol):
    """The gateway instances that share a journal, as one of them sees the others.

    The instance that starts a run owns it (it runs the producer; only it appends); an owner
    that is gone has its running runs ended by a survivor. The others serve the run from the
    journal, and send its commands and pushes to the owner."""

    # Set by the hub: the commands other instances send to runs owned here, and the runs of
    # this instance that another one ended (its owner was thought gone).
    on_command: CommandHandler | None
    on_lost: LostListener | None
    # The queue of runs waiting for a worker, shared by the instances (gateway.journal.
    # redis_queue, postgres_queue).
    run_queue: SharedRunQueue | None
    # Set by the hub: takes over lost instances' resumable runs (None: they end owner_lost).
    adopter: Adopter | None
    # Set by the hub: the runs this instance ended over their owner's head (owner_lost).
    on_ended: EndedListener | None

    @property
    def full(self) -> bool:
        """The shared store refuses this instance's writes for want of room: new runs and
        pushes are refused at once, as nothing they add could be committed."""
        ...

    async def claim(self, run_id: str) -> bool:
        """Take a new run's id for this instance; False if another instance took it first."""
        ...

    async def claim_thread(self, thread_id: str, run_id: str) -> str | None:
        """Take a thread for a run of this instance until it ends; None once taken, else the
        run holding it (a dead instance's claims lapse)."""
        ...

    async def watch(
        self, run_id: str, after: int, deliver: Deliver, failed: Callable[[], None]
    ) -> None:
        """Deliver another instance's run's events after seq ``after`` as its owner commits
        them, until ``unwatch`` or ``failed``."""
        ...

    def unwatch(self, run_id: str) -> None: ...

    async def command(self, run_id: str, command: dict[str, Any]) -> dict[str, Any] | None:
        """Send a command to the instance that owns the run; its answer, or None when no
        instance owning it answered (gone, or the run finished and its owner let it go)."""
        ...

    async def others_alive(self) -> bool:
        """Another instance holds its lease now (one that can take runs handed to it)."""
        ...

    async def release(self, run_ids: list[str]) -> None:
        """Hand these runs of this instance (their producers stopped, what they emitted
        committed) to the others: the next reaper that sees them takes them over at once,
        without waiting for this instance's lease to lapse."""
        ...

    async def end_unanswered(self, run_id: str) -> bool:
        """End a running run whose owner did not answer a cancel: one terminal
        ``completion{cancelled, reason: owner_unreachable}``, committed so that the owner's
        own later appends are refused (it stops the run when it finds out). False if the run
        is not running any more."""
        ...


class SharedRunQueue(Protocol):
    """Runs accepted and waiting for a worker, in a queue every instance sharing the journal
    sees (gateway.journal.redis_queue, postgres_queue): any instance accepts, any instance
    that runs loops takes the oldest when it has room and becomes the run's owner."""

    async def push(self, record: RunRecord, request: bytes, limit: int) -> int | None:
        """Queue a run (its record ``queued``, and the request a worker starts it from); its
        place (1: next), or None when ``limit`` runs wait already."""
        ...

    async def position(self, run_id: str) -> int | None:
        """1 for the next run to be taken; None for one not waiting (taken, or not queued)."""
        ...

    async def take(self, timeout_s: float) -> str | None:
        """The oldest waiting run's id, now this instance's to start (None: none came)."""
        ...

    async def entry(self, run_id: str) -> tuple[RunRecord, bytes] | None:
        """A taken run's record and request; None once it left the queue (cancelled)."""
        ...

    async def begin(self, record: RunRecord) -> bool:
        """Make a taken run this instance's, ``running``; False if it is not to run (ended
        while it waited, or another taker got it after this one was thought gone)."""
        ...

    async def end(self, run_id: str, status: str, reason: str) -> bool:
        """End a run still waiting (never started) with one terminal ``completion``; False if
        it is not waiting any more."""
        ...

    async def fail_begun(self, run_id: str, reason: str) -> None:
        """End a run this instance began but could not start (``completion{failed}``)."""
        ...

    async def requeue_lost(self) -> list[str]:
        """Runs taken by instances that are gone before they started them: queued again at
        the front, or ended once they were taken too often. Returns the ones queued again."""
        ...

    async def requeue_own(self) -> list[str]:
        """Runs this instance took and neither began nor let go (the journal failed between
        the take and the begin), as ``requeue_lost`` does for a lost taker's; called between
        starts, when nothing should be left taken here."""
        ...
