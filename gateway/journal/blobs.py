"""The journal's blob store: attachments' bytes, each kept once under its sha256
(contracts/blobs.py), however many runs' records refer to it.

A run's blobs are kept when it starts (before its record is), never on the hot path of its
events. The store is bounded in bytes (``max_attachment_store_bytes``): a run whose new blobs
would take it past the bound is refused (:class:`StoreFull`) and nothing of it is written.
Each run's references are kept with the blobs; retention that drops a run drops its
references, and a blob no run refers to any more goes with them. A start that crashed between
its blobs and its record leaves references to a run that never was: the hub's orphan sweep
(gateway.hub.orphans) pages through the referrers (``referrers``) and forgets those.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

from ...contracts.ports import LimitReached

# A full store has room again once retention drops old runs (max_run_age_s): a client may
# retry later, not at once.
FULL_RETRY_S = 60


class StoreFull(LimitReached):
    """The run's attachments do not fit the blob store's bound."""

    def __init__(self, stored: int, adding: int, limit: int) -> None:
        super().__init__(
            f"the journal's attachment store is full: it holds {stored} bytes and this run's "
            f"new attachments are {adding} bytes, over max_attachment_store_bytes ({limit})",
            retry_after=FULL_RETRY_S,
        )


def check_room(stored: int, adding: int, limit: int) -> None:
    if adding and stored + adding > limit:
        raise StoreFull(stored, adding, limit)


class DurableRelease:
    """A durable journal's store: the hub never drops a run for good, retention does
    (``Journal.delete``, which drops the run's references there)."""

    def release(self, run_id: str) -> None:
        pass


class BlobStore(Protocol):
    async def keep(self, run_id: str, blobs: Mapping[str, bytes], limit: int) -> None:
        """Keep the run's blobs (those already stored are not written again) and its
        references to them; StoreFull, with nothing written, when the new ones would take the
        store past ``limit`` bytes."""
        ...

    async def load(self, refs: Collection[str]) -> dict[str, bytes]:
        """The bytes of those of ``refs`` that are stored."""
        ...

    async def usage(self) -> tuple[int, int]:
        """How many blobs are stored, and their bytes."""
        ...

    async def forget(self, run_id: str) -> None:
        """The run's start was refused after its blobs were kept: its references go, and the
        blobs no other run refers to."""
        ...

    async def referrers(self, cursor: str, limit: int) -> tuple[list[str], str]:
        """About ``limit`` of the runs that refer to blobs, from ``cursor`` ("" the first
        page); and the next page's cursor, "" after the last."""
        ...

    def release(self, run_id: str) -> None:
        """The hub dropped the run for good: a journal that keeps no runs (memory) lets go of
        its references here; a durable one does in ``Journal.delete``."""
        ...


class MemoryBlobs:
    """The memory journal's: the hub releases a run's references when it drops the run."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._referrers: dict[str, set[str]] = {}
        self._refs: dict[str, list[str]] = {}
        self._bytes = 0

    async def keep(self, run_id: str, blobs: Mapping[str, bytes], limit: int) -> None:
        new = {ref: raw for ref, raw in blobs.items() if ref not in self._blobs}
        check_room(self._bytes, sum(len(raw) for raw in new.values()), limit)
        for ref, raw in new.items():
            self._blobs[ref] = raw
            self._bytes += len(raw)
        for ref in blobs:
            self._referrers.setdefault(ref, set()).add(run_id)
        self._refs[run_id] = [*self._refs.get(run_id, ()), *blobs]

    async def load(self, refs: Collection[str]) -> dict[str, bytes]:
        return {ref: self._blobs[ref] for ref in refs if ref in self._blobs}

    async def usage(self) -> tuple[int, int]:
        return len(self._blobs), self._bytes

    async def forget(self, run_id: str) -> None:
        self.release(run_id)

    async def referrers(self, cursor: str, limit: int) -> tuple[list[str], str]:
        page = sorted(run_id for run_id in self._refs if run_id > cursor)[:limit]
        return page, page[-1] if len(page) == limit else ""

    def release(self, run_id: str) -> None:
        for ref in self._refs.pop(run_id, ()):
            referrers = self._referrers.get(ref)
            if referrers is None:
                continue
            referrers.discard(run_id)
            if not referrers:
                del self._referrers[ref]
                self._bytes -= len(self._blobs.pop(ref))
