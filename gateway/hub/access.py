"""Who may do what with a run or thread (docs/auth.md): the run service's checks, in one place.

Every read, list, attach and command of the run service goes through these with the request's
principal (contracts.principal.current). Someone else's run or thread is not found, never
"forbidden": whether it exists is none of the caller's business. A principal whose scopes do
not allow the action on its own run gets :class:`Forbidden`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from loopgate.contracts.ports import Forbidden, RunNotFound, ThreadNotFound
from loopgate.contracts.principal import Owner, Principal, current

# Checks a start must pass before anything is recorded (quotas: gateway/identity/quotas.py);
# each raises QuotaExceeded (a LimitReached) to refuse.
Admission = Callable[[Principal], Awaitable[None]]


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
