"""The port for requests the gateway sends on its own: webhooks (A2A push notifications, and
a run's ``webhook``, told of its end with :class:`RunEnded`). The gateway implements it
(gateway/webhooks.py) and hands it to adapters with their limits (``EndpointLimits.outbox``).

Nothing a webhook does may hold up a run: a delivery is retried with back-off in a job of the
gateway's own, bounded in number, and a webhook that stays down is given up on, not waited for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec

from .ports import RunInfo


class Webhook(msgspec.Struct, frozen=True, kw_only=True):
    """One POST: ``body`` is JSON; ``headers`` are the receiver's (its token, its auth)."""

    url: str
    body: bytes
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class Outbox(Protocol):
    def start_soon(self, job: Callable[[], Awaitable[None]]) -> bool:
        """Run ``job`` in the background for as long as the gateway runs (given before it
        runs, the job starts with it); False (and not run) when the gateway has as many jobs
        as its bound allows, or is stopping."""
        ...

    async def deliver(self, hook: Webhook) -> bool:
        """POST ``hook``, retried with back-off on a network error, a 5xx or a 429, within
        the gateway's bounds; True once the receiver answered 2xx, False when given up."""
        ...


class RunEnded(RunInfo, kw_only=True):
    """What a run's ``webhook`` is sent once the run has ended: the run as ``GET /v1/runs/{id}``
    shows it (``state`` finished, ``status``), with its terminal event's ``reason`` and
    ``message`` where it had them."""

    reason: str | None = None
    message: str | None = None
