"""Runs this instance takes over from a lost one, and hands over as it shuts down
(docs/scale.md, "Takeover after a crash" and "Graceful deploys").

The journal's reaper (gateway.journal.redis_takeover) asks :meth:`Takeover.judge` about each
running run of an instance found gone: a run whose loop can resume (its record carries the
request to resume it with) and has attempts left is resumed here — its events so far loaded,
one ``run_resumed`` event with the new attempt, then the loop's output with seqs after the
last committed one. Others end ``owner_lost`` as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio

from ...contracts.gateway_events import RUN_RESUMED
from ..journal.base import RunRecord, Verdict
from .run import Producer, Run
from .source import Source

if TYPE_CHECKING:
    from .hub import Hub

log = logging.getLogger("loopgate.hub")


@runtime_checkable
class Resumes(Protocol):
    """A source whose runs can be run again from their journal (the loop source)."""

    def resume(self, hub: Hub, run: Run) -> Producer | None:
        """The producer that resumes ``run`` (its record's ``resume`` and ``attempt``, its
        events so far in memory); None if this source cannot."""
        ...


class Takeover:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def judge(self, record: RunRecord) -> Verdict:
        if record.resume is None or self._source(record) is None:
            return "end"
        if record.attempt >= self.hub.settings.max_run_attempts:
            log.warning(
                "run %s: attempt %d was its last (max_run_attempts); not resumed",
                record.id,
                record.attempt,
            )
            return "end"
        hub = self.hub
        if not hub.runs_loops or hub.closing:
            # An api instance (``serve --role api``) leaves the runs to the workers.
            return "leave"
        if hub.table.active >= hub.settings.max_active_runs:
            # No room here: another instance takes it, or this one once a run of its own ends.
            return "leave"
        return "resume"

    def _source(self, record: RunRecord) -> Source | None:
        hub = self.hub
        agent = hub.roster.get(record.agent) if hub.roster is not None else None
        source = agent.source if agent is not None else hub.sources.get(record.source)
        return source if isinstance(source, Resumes) else None

    async def resume(self, record: RunRecord) -> None:
        hub = self.hub
        source = self._source(record)
        assert source is not None and isinstance(source, Resumes)
        events, sizes = await hub.loader.events(record)
        # From here on nothing waits: a reader that rejoins, or a load, finds this run.
        view = hub.table.get(record.id)
        if view is not None and hub.remote is not None:
            # Its readers here rejoin from the journal: the run as it is now, then its rest.
            hub.remote.let_go(view, rejoin=True)
        run = Run(record, events, sizes)
        hub.table.admit(run)
        hub.table.active += 1
        for observe in hub.run_observers:
            observe(run)
        after = run.last_seq
        hub.publish(run, RUN_RESUMED, {"attempt": record.attempt, "afterSeq": after})
        producer = source.resume(hub, run)
        if producer is None:
            hub.end_producer(run, "owner_lost")
            return
        hub.journal.record_run(record)
        hub.launch(run, producer)
        await hub.journal.flush()


async def hand_over(hub: Hub, running: list[Run]) -> list[Run]:
    """On shutdown, the running resumable runs go to the other live instances (their producers
    stopped here without an end, what they emitted committed); returns the runs left to end
    here. Without another instance to take them, nothing goes."""
    remote = hub.remote
    limit = hub.settings.max_run_attempts
    going = [r for r in running if r.record.resume is not None and r.record.attempt < limit]
    if remote is None or not going or not await remote.cluster.others_alive():
        return running
    for run in going:
        remote.lost(run.id)
    with anyio.move_on_after(hub.settings.shutdown_grace_s):
        await hub.journal.flush()
        await remote.cluster.release([r.id for r in going])
        log.info("shutdown: %d run(s) handed to the other instances", len(going))
        return [r for r in running if r not in going]
    log.error("shutdown: the runs to hand over could not be committed in time")
    return [r for r in running if r not in going]
