"""The runs a hub holds in memory, the bytes their events cost, and the ids of runs gone for good.

The table only keeps count; what to let go of, and when, is the memory budget's
(gateway.hub.budget). The local hub and the views of other instances' runs
(gateway.hub.remote) both hold their runs here, so one count bounds them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from ...contracts.principal import Owner
from .run import Run


class HubStats(NamedTuple):
    """What the hub holds right now, and what it has done since it started (metrics)."""

    active_runs: int
    runs_started: int
    events_accepted: int
    # consumer (the adapter: "sse", "agui", "acp", "rpc", …) → open subscriptions
    subscribers: dict[str, int]
    # event bytes held in memory, counted as max_retained_bytes counts them
    retained_bytes: int = 0


class RunTable:
    def __init__(self, max_gone: int) -> None:
        self._runs: dict[str, Run] = {}
        # Finished runs holding events in memory, oldest end first: the first to leave.
        self._hot_finished: dict[str, Run] = {}
        # Ids of runs dropped for good (they answer 410, not 404), oldest first; bounded.
        # Dropped runs: why, and whose (someone else's gone run is not found, as any other).
        self._gone: dict[str, tuple[str, Owner | None]] = {}
        self._max_gone = max_gone
        # Called with the id of a run dropped for good (a journal that keeps no runs: the
        # memory journal's blobs go with the last run referring to them).
        self.on_gone: Callable[[str], None] | None = None
        # Bytes of events held by every run here, as max_retained_bytes counts them.
        self.retained = 0
        # Runs produced here that have not ended, and what the hub has done since it started.
        self.active = 0
        self.started = 0
        self.accepted = 0

    def get(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._runs

    def holds(self, run: Run) -> bool:
        """This very run object is the table's (not dropped, nor replaced by a reload)."""
        return self._runs.get(run.id) is run

    def runs(self) -> Iterator[Run]:
        """Every run held, in the order they were admitted (a snapshot: safe to drop while
        iterating)."""
        return iter(list(self._runs.values()))

    def hot_finished(self) -> list[Run]:
        """Finished runs still holding events in memory, the oldest end first."""
        return list(self._hot_finished.values())

    def admit(self, run: Run) -> None:
        self._runs[run.id] = run
        self.retained += run.retained
        if run.finished and run.retained:
            self._hot_finished[run.id] = run

    def finished(self, run: Run) -> None:
        """A held run has ended: it is among the first to go when memory is short."""
        if self.holds(run):
            self._hot_finished[run.id] = run

    def drop(self, run: Run, gone: str | None) -> None:
        """Let go of a run's memory; ``gone`` says why it is gone for good (410)."""
        if self.holds(run):
            del self._runs[run.id]
            self.retained -= run.retained
        self._hot_finished.pop(run.id, None)
        run.release()
        if gone is not None:
            self.remember_gone(run.id, gone, run.record.owner)
            if self.on_gone is not None:
                self.on_gone(run.id)

    def remember_gone(self, run_id: str, why: str, owner: Owner | None) -> None:
        self._gone.pop(run_id, None)
        self._gone[run_id] = (why, owner)
        while len(self._gone) > self._max_gone:
            del self._gone[next(iter(self._gone))]

    def gone(self, run_id: str) -> tuple[str, Owner | None] | None:
        """Why the run is gone for good, and whose it was; None if it is not known gone."""
        return self._gone.get(run_id)

    def reuse(self, run_id: str) -> None:
        """A new run takes this id: it is no longer gone."""
        self._gone.pop(run_id, None)
