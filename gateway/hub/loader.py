"""Runs read back from the journal into the run table: a finished run *cold* (served page by
page, never whole), a running one another process left open *hot* (its events in memory), and
another instance's running run as a *view* (gateway.hub.remote)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import msgspec

from ...contracts.envelope import Envelope
from ...contracts.ports import RunGone, RunNotFound
from ...contracts.principal import current
from ..journal.base import EVENT_OVERHEAD_BYTES, Journal, RunRecord
from .run import Run
from .table import RunTable

if TYPE_CHECKING:
    from .remote import Remote

_encode = msgspec.json.Encoder().encode


class Loader:
    def __init__(self, table: RunTable, journal: Journal) -> None:
        self.table = table
        self.journal = journal
        # Set by the hub when its journal is shared: running runs are other instances' views.
        self.remote: Remote | None = None

    async def load(self, run_id: str) -> Run:
        """The run, in memory (read from the journal if need be), whoever asks: RunNotFound,
        or RunGone for one retention dropped that the asker may know of."""
        table = self.table
        run = table.get(run_id)
        if run is not None:
            return run
        record = await self.journal.load_run(run_id)
        if record is None:
            gone = table.gone(run_id)
            if gone is not None and current().sees(gone[1]):
                raise RunGone(run_id, gone[0])
            raise RunNotFound(run_id)
        run = table.get(run_id)  # loaded by someone else meanwhile
        if run is not None:
            return run
        record = msgspec.structs.replace(record)
        if record.state == "finished":
            run = self.cold(record)
            table.admit(run)
            return run
        if self.remote is not None:
            return await self.remote.load(record)
        return await self.hot(record)

    def cold(self, record: RunRecord) -> Run:
        """A finished run served from the journal page by page: never loaded whole."""
        return Run(record, pages=partial(self._page, record.id))

    async def _page(self, run_id: str, after: int, limit: int, max_bytes: int) -> list[Envelope]:
        return await self.journal.load_events(run_id, after=after, limit=limit, max_bytes=max_bytes)

    async def events(self, record: RunRecord) -> tuple[list[Envelope], list[int]]:
        """A run's events so far, and each one's size as the hub counts it."""
        events = await self.journal.load_events(record.id)
        return events, [len(_encode(e.data)) + EVENT_OVERHEAD_BYTES for e in events]

    async def hot(self, record: RunRecord) -> Run:
        """A running run from the journal (one a previous process left open), in memory."""
        events, sizes = await self.events(record)
        run = Run(record, events, sizes)
        self.table.admit(run)
        return run
