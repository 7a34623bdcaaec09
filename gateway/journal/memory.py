"""The default journal: nothing beyond the hub's in-memory runs, so nothing survives the
process. An event counts as committed the moment it is accepted."""

from __future__ import annotations

from loopgate.contracts.envelope import Envelope
from loopgate.gateway.journal.base import CommitListener, RunRecord


class MemoryJournal:
    durable = False
    on_commit: CommitListener | None = None

    async def open(self) -> list[RunRecord]:
        return []

    def record_run(self, record: RunRecord) -> None:
        pass

    def record_event(self, envelope: Envelope, data: bytes) -> None:
        pass

    async def writer(self) -> None:
        pass

    async def flush(self) -> None:
        pass

    async def load_run(self, run_id: str) -> RunRecord | None:
        return None

    async def load_events(
        self,
        run_id: str,
        *,
        after: int = 0,
        limit: int | None = None,
        max_bytes: int | None = None,
    ) -> list[Envelope]:
        return []

    async def list_runs(self, limit: int, thread_id: str | None = None) -> list[RunRecord]:
        return []

    async def delete(self, run_ids: list[str]) -> None:
        pass

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        return []

    async def aclose(self) -> None:
        pass
