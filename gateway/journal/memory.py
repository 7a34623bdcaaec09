"""The default journal: nothing beyond the hub's in-memory runs, so nothing survives the
process. An event counts as committed the moment it is accepted.

Thread records are the one thing it holds itself (the hub keeps runs, not threads), in
creation order; ``prune_threads`` bounds them, and the hub prunes whenever it records one.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import islice

from ...contracts.envelope import Envelope
from ...contracts.ports import ThreadInfo
from ...contracts.principal import Owner
from .base import CommitListener, RunRecord
from .blobs import MemoryBlobs


class MemoryJournal:
    durable = False
    cluster: None = None
    trouble: str | None = None
    on_commit: CommitListener | None = None

    def __init__(self) -> None:
        self._threads: OrderedDict[str, ThreadInfo] = OrderedDict()
        # Released run by run as the hub drops runs (it keeps them; this journal does not).
        self.blobs = MemoryBlobs()

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

    async def list_runs(
        self, limit: int, thread_id: str | None = None, owner: Owner | None = None
    ) -> list[RunRecord]:
        return []

    async def delete(self, run_ids: list[str]) -> None:
        pass

    async def prune(self, *, keep: int, older_than_ns: int) -> list[str]:
        return []

    def record_thread(self, thread: ThreadInfo) -> None:
        self._threads.pop(thread.id, None)
        self._threads[thread.id] = thread

    async def load_thread(self, thread_id: str) -> ThreadInfo | None:
        return self._threads.get(thread_id)

    async def list_threads(self, limit: int, owner: Owner | None = None) -> list[ThreadInfo]:
        threads = reversed(self._threads.values())
        if owner is not None:
            threads = (t for t in threads if t.owner == owner)
        return list(islice(threads, limit))

    async def forget_thread(self, thread_id: str) -> bool:
        return self._threads.pop(thread_id, None) is not None

    async def prune_threads(self, *, keep: int, older_than_ns: int) -> None:
        threads = self._threads
        while threads and (
            len(threads) > keep or next(iter(threads.values())).created_at < older_than_ns
        ):
            threads.popitem(last=False)

    async def aclose(self) -> None:
        pass
