"""The durable tier of the journal.

The hub keeps the events of the runs it holds in memory (the hot journal: appends are a list
append, catch-up is a slice). A ``Journal`` makes runs outlive the process and the hub's memory:
``record_*`` never block the producer; ``flush`` returns once everything recorded before it is
committed; ``writer`` commits in the background (group commit) and reports each commit through
``on_commit``, so the hub can show subscribers only what a crash cannot take back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import msgspec

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.messages import Message
from loopgate.contracts.ports import RunSource, RunState, ThreadInfo
from loopgate.contracts.principal import Owner

# What one event of a running run costs beyond its encoded payload: the Envelope, its data
# dict, the ints and strings in them, the list slot and the byte-offset slot. Measured with
# tracemalloc on decoded ingest events: 431 bytes for a content_delta, 508 for a 4 KB tool
# result, 681 for a tool call with nested arguments. A finished run, once compacted
# (gateway.hub.compact), counts what it then holds: its envelopes' JSON and 5 bytes each.
EVENT_OVERHEAD_BYTES = 512

# --journal values served by the Redis journal (gateway.journal.redis_connect): named here,
# where nothing imports the optional Redis client.
REDIS_SCHEMES = ("redis://", "rediss://", "redis+sentinel://")

# A commit's news: run id -> the highest seq of that run now committed.
CommitListener = Callable[[Mapping[str, int]], None]


class CommitTurns:
    """One commit at a time (or a step that must not overlap one); whoever needs a commit
    while one is under way waits for it to end, together with every other waiter.

    Not a lock queue: a lock is handed to its waiters one at a time, an event-loop iteration
    (and its poll) each, so a hundred pushes waiting on one commit cost a hundred iterations
    before any could go on — measured as a third of the gateway's CPU per event of 100
    concurrent ingest runs on the Redis journal. Here they all wake when the commit ends;
    the few it did not cover then take their turns."""

    def __init__(self) -> None:
        self._lock = anyio.Lock(fast_acquire=True)
        self._ended = anyio.Event()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        async with self._lock:
            try:
                yield
            finally:
                self._ended.set()
                self._ended = anyio.Event()

    async def until(self, done: Callable[[], bool], commit: Callable[[], Awaitable[None]]) -> None:
        """Return once ``done()``: wait for the commit under way, or ``commit()`` when none is."""
        while not done():
            if self._lock.locked():
                await self._ended.wait()
            else:
                await commit()


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


class Journal(Protocol):
    # True when what ``flush`` commits survives the process (the hub then waits for commits
    # before it acknowledges pushes or shows events to subscribers).
    durable: bool
    on_commit: CommitListener | None

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
