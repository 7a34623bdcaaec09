"""The durable tier of the journal.

The hub keeps every event of the runs it holds in memory (the hot journal: appends are a list
append, catch-up is a slice). A ``Journal`` makes runs outlive the process and the hub's cache:
``record_*`` are write-behind and never block the producer; ``load_*`` bring runs back.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from contracts.envelope import Envelope
from contracts.messages import Message
from contracts.ports import RunSource, RunState


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


class Journal(Protocol):
    durable: bool

    async def open(self) -> list[RunRecord]:
        """Prepare storage; return runs left ``running`` by a previous process."""
        ...

    def record_run(self, record: RunRecord) -> None: ...

    def record_event(self, envelope: Envelope) -> None: ...

    async def flush(self) -> None:
        """Make everything recorded so far durable."""
        ...

    async def load_run(self, run_id: str) -> RunRecord | None: ...

    async def load_events(self, run_id: str) -> list[Envelope]: ...

    async def list_runs(self, limit: int, thread_id: str | None = None) -> list[RunRecord]:
        """Newest first."""
        ...

    async def delete(self, run_ids: list[str]) -> None: ...

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        """Drop finished runs beyond ``keep`` or finished before ``older_than_ns``."""
        ...

    async def aclose(self) -> None: ...
