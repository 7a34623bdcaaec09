"""A hub's graceful shutdown: its producers asked to stop, what still runs ended, and the ends
committed within the grace."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from ..journal.base import RunRecord
from .takeover import hand_over

if TYPE_CHECKING:
    from .hub import Hub

log = logging.getLogger("loopgate.hub")

# The least time a shutdown gives the commit of its runs' ends, should they have taken the
# whole grace to stop.
FINAL_COMMIT_S = 1.0


async def end_interrupted(hub: Hub, interrupted: list[RunRecord]) -> None:
    """A previous process died with these runs open: give them their terminal event. Its seq
    follows the last committed one, and no client saw more than that."""
    for record in interrupted:
        run = await hub.loader.hot(record)
        hub.table.active += 1
        hub.publish(run, "completion", {"status": "failed", "reason": "server_restarted"})
        await hub.journal.flush()
        for observe in hub.end_observers:
            observe(record.id, "server_restarted")  # its webhook, once the outbox runs
        # One at a time, then read back from the journal like any finished run: however
        # many were open, a restart never holds more than one of them in memory.
        hub.table.drop(run, None)
    await hub.journal.flush()


async def stop_runs(hub: Hub) -> None:
    """Ask this hub's producers to stop, wait up to ``shutdown_grace_s`` for their runs to
    end, end the rest (``server_shutdown``), and commit it all; what cannot be committed in
    time is said in the log, and its readers and pushers are let go."""
    # Not the views of other instances' runs: those go on without this one. Resumable runs go
    # on elsewhere when another instance is up (gateway.hub.takeover).
    running = [r for r in hub.table.runs() if not r.finished and not r.remote]
    running = await hand_over(hub, running)
    for run in running:
        if run.record.source == "ingest":
            # The external loop lives on; only this gateway's view of the run ends.
            hub.publish(run, "completion", {"status": "failed", "reason": "server_shutdown"})
        elif run.producer is not None:
            run.producer.cancel()
    grace = hub.settings.shutdown_grace_s
    deadline = anyio.current_time() + grace
    with anyio.CancelScope(deadline=deadline):
        for run in running:
            await run.ended.wait()
    for run in running:
        if not run.finished:
            hub.publish(run, "completion", {"status": "failed", "reason": "server_shutdown"})
    # The runs' ends are committed within what is left of the grace (at least a moment,
    # which a journal that answers takes milliseconds of): one that does not answer (Redis
    # down) would retry forever, holding the process past any grace.
    last = max(deadline, anyio.current_time() + FINAL_COMMIT_S)
    with anyio.CancelScope(shield=True, deadline=last):
        await hub.journal.flush()
    stuck = [run for run in running if run.committed < run.last_seq]
    if stuck:
        log.error(
            "shutdown: the journal could not commit the end of %d run(s) within "
            "shutdown_grace_s (%g s); exiting without it: their streams here end, and a "
            "shared journal's other instances end the runs once this one's lease lapses",
            len(stuck),
            grace,
        )
        for run in stuck:
            hub.delivery.cut_all(run)
        hub.ingest.give_up()
