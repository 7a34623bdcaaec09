"""Who may do what with a run or thread (docs/auth.md): the run service's checks, in one place.

Every read, list, attach and command of the run service goes through these with the request's
principal (contracts.principal.current). Someone else's run or thread is not found, never
"forbidden": whether it exists is none of the caller's business. A principal whose scopes do
not allow the action on its own run gets :class:`Forbidden`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import anyio

from ...contracts.ports import Forbidden, RunNotFound, ThreadNotFound
from ...contracts.principal import Owner, Principal, current

if TYPE_CHECKING:
    from .run import Run

log = logging.getLogger("loopgate.hub")


class Ticket(Protocol):
    """What an admission took for a start it let through (a quota's concurrency slot): bound
    to the run once it exists, which gives it back when it ends; refunded when the start is
    refused after all (a bad request, a taken id), so a refused start costs nothing."""

    def bind(self, run: Run) -> None: ...

    async def refund(self) -> None: ...


# Checks a start must pass before anything is recorded (quotas: gateway/identity/quotas.py);
# each raises QuotaExceeded (a LimitReached) to refuse, or returns what it took (or None).
Admission = Callable[[Principal], Awaitable[Ticket | None]]


REFUND_WITHIN_S = 5.0


async def refund(tickets: Sequence[Ticket]) -> None:
    """Give back what the admissions of a start that failed took; never raises (the start's
    own error is what the caller hears)."""
    # Shielded (a cancelled start still gives back) and bounded (a stalled Redis cannot hold
    # the request past it; the lease then gives the slot back).
    with anyio.move_on_after(REFUND_WITHIN_S, shield=True):
        for ticket in tickets:
            try:
                await ticket.refund()
            except Exception:
                log.exception("an admission could not give back what a refused start took")


def may_start() -> Principal:
    """The principal a new run or thread will belong to; Forbidden for a read-only one."""
    principal = current()
    if not principal.may("start"):
        raise Forbidden(f"{principal.subject!r} may only read: starting runs needs the run scope")
    return principal


def check_run(run_id: str, owner: Owner | None, *, control: bool = False) -> Principal:
    principal = current()
    if not principal.sees(owner):
        raise RunNotFound(run_id)
    if control and not principal.may("control"):
        raise Forbidden(f"{principal.subject!r} may only read runs, not cancel, steer or answer")
    return principal


def check_thread(thread_id: str, owner: Owner | None) -> None:
    if not current().sees(owner):
        raise ThreadNotFound(thread_id)


def owner_filter() -> Owner | None:
    """The owner a listing is limited to; None for an admin (everything)."""
    principal = current()
    return None if principal.may("all") else principal.owner
