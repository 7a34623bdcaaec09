"""The orphan sweep: attachments referred to by a run that has no record (issue 35).

A run's blobs are kept, with its references, in a transaction of their own just before its
record is committed (gateway.hub.attachments). A process that dies between the two leaves
references to a run that never was, and nothing else would ever free them. The sweep pages
through the store's referrers, a page per pass; a referrer neither running here, nor starting
here, nor recorded in the journal is noted with the time it was first seen so, and forgotten
(its references, and the blobs nobody else refers to) once it has stayed so for
``attachment_orphan_grace_s``: longer than any start takes, so a start still under way on
another instance is never mistaken for one that crashed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..journal.base import Journal
from ..settings import Settings
from .attachments import Attachments
from .table import RunTable

log = logging.getLogger("loopgate.hub")

# Referrers looked at per pass: each costs the journal one read of the run's record.
PAGE = 100
# The longest time between passes; a short grace (tests) makes them closer.
MAX_PASS_INTERVAL_S = 60.0
# Referrers remembered as seen without a record: past it the others wait for a later pass.
MAX_SUSPECTS = 10_000


class OrphanSweep:
    def __init__(
        self,
        journal: Journal,
        table: RunTable,
        attachments: Attachments,
        settings: Settings,
        clock: Callable[[], int],
    ) -> None:
        self.journal = journal
        self.table = table
        self.attachments = attachments
        grace_s = settings.attachment_orphan_grace_s
        self.grace_ns = int(grace_s * 1e9)
        self.interval_ns = int(min(grace_s / 4, MAX_PASS_INTERVAL_S) * 1e9)
        self.clock = clock
        self._cursor = ""
        self._last_pass: int | None = None
        # Referrer -> when it was first seen with no record (the hub's clock, ns); and those
        # of them seen again since the pages last began (one not seen in a whole round is gone).
        self._suspects: dict[str, int] = {}
        self._seen: set[str] = set()

    async def sweep(self) -> int:
        """One pass, if one is due: how many orphaned referrers it forgot."""
        now = self.clock()
        if self._last_pass is not None and now - self._last_pass < self.interval_ns:
            return 0
        self._last_pass = now
        store = self.journal.blobs
        page, self._cursor = await store.referrers(self._cursor, PAGE)
        forgotten = 0
        for run_id in page:
            if await self._recorded(run_id):
                self._suspects.pop(run_id, None)
                continue
            first = self._suspects.get(run_id)
            if first is None:
                if len(self._suspects) < MAX_SUSPECTS:
                    self._suspects[run_id] = now
                    self._seen.add(run_id)
            elif now - first >= self.grace_ns:
                await store.forget(run_id)
                del self._suspects[run_id]
                forgotten += 1
            else:
                self._seen.add(run_id)
        if not self._cursor:
            self._suspects = {r: t for r, t in self._suspects.items() if r in self._seen}
            self._seen = set()
        if forgotten:
            log.info("freed the attachments of %d runs that were never recorded", forgotten)
        return forgotten

    async def _recorded(self, run_id: str) -> bool:
        return (
            self.table.get(run_id) is not None
            or self.attachments.starting(run_id)
            or await self.journal.load_run(run_id) is not None
        )
