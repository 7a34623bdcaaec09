"""A run's ``webhook``: once the run has ended, its final state is POSTed there, once.

The instance that ends a run sends its webhook, once. Mostly that is the one that produces
the run (its terminal event is published there, gateway/hub/hub.py); views of it elsewhere end
without a hook. A run ended without its owner is the instance's that ended it: ``owner_lost``
(or ``owner_unreachable``, ``journal_diverged``) by the one whose compare-and-set on the
journal ended it (the hub's ``end_observers``, through gateway.hub.remote), and
``server_restarted`` by the next process, at its start (gateway.hub.shutdown), queued until
the outbox runs. The delivery is a job of the gateway's outbox (gateway/webhooks.py: bounded
in number, each POST bounded in time, retried with back-off), never the run's: a receiver that
is slow or down holds up nothing.

It is sent once the terminal event is committed, so the receiver reads what ``GET
/v1/runs/{id}`` answers from then on.
"""

from __future__ import annotations

import logging

import msgspec

from ..contracts.webhooks import Outbox, RunEnded, Webhook
from .hub import Hub
from .hub.run import Run

log = logging.getLogger("loopgate.webhooks")
_encode = msgspec.json.Encoder().encode


class RunWebhooks:
    """Watches the hub's runs that name a webhook (a run observer)."""

    def __init__(self, hub: Hub, outbox: Outbox) -> None:
        self.hub = hub
        self.outbox = outbox

    def observe(self, run: Run) -> None:
        if run.record.webhook is not None:
            run.on_finish.append(self.ended)

    def ended_elsewhere(self, run_id: str, reason: str) -> None:
        """The run was ended here over its owner's head, its end committed: its record says
        whether it has a webhook."""

        async def job() -> None:
            record = await self.hub.journal.load_run(run_id)
            if record is None or record.webhook is None:
                return
            info = self.hub.loader.cold(record).info()
            ended = RunEnded(**msgspec.structs.asdict(info), reason=reason)
            if not await self.outbox.deliver(Webhook(url=record.webhook, body=_encode(ended))):
                log.warning("run %s: its webhook was not delivered", run_id)

        if not self.outbox.start_soon(job):
            log.warning("run %s: its webhook not sent (too many webhook jobs)", run_id)

    def ended(self, run: Run) -> None:
        url = run.record.webhook
        if url is None:
            return
        # The terminal event is the newest of the run's events when its hooks are called.
        terminal, seq = (run.hot[-1].data if run.hot else {}), run.last_seq

        async def job() -> None:
            await self.send(run, url, terminal, seq)

        if not self.outbox.start_soon(job):
            log.warning("run %s: its webhook not sent (too many webhook jobs)", run.id)

    async def send(self, run: Run, url: str, terminal: dict[str, object], seq: int) -> None:
        # Committed first: until then the run reads as running, and a crash would end it
        # otherwise (server_restarted).
        await self.hub.journal.flush()
        if run.visible_seq < seq:
            log.warning("run %s: its end was not committed; its webhook not sent", run.id)
            return
        reason, message = terminal.get("reason"), terminal.get("message")
        ended = RunEnded(
            **msgspec.structs.asdict(run.info()),
            reason=reason if isinstance(reason, str) else None,
            message=message if isinstance(message, str) else None,
        )
        if not await self.outbox.deliver(Webhook(url=url, body=_encode(ended))):
            log.warning("run %s: its webhook was not delivered", run.id)
