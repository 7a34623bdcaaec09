"""Who is calling: the principal a request acts as, and the owner a run or thread records.

The gateway resolves one :class:`Principal` per request (an API key, a verified JWT, a trusted
proxy's headers or the single token; gateway/identity) before any adapter sees it, and sets it
for the request's context (:data:`CURRENT`). The run service reads it from there on every read,
list, attach and command, so no adapter can forget to check ownership, and none parses a
credential. Code that runs outside any request (the stdio commands, the hub's own tasks, an
embedding program) acts as :data:`LOCAL`, the machine's own user.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

import msgspec

Scope = Literal["admin", "run", "read"]
SCOPES: tuple[Scope, ...] = ("admin", "run", "read")
# What each scope grants: an admin sees and controls every run; ``run`` starts and controls its
# own; ``read`` only reads its own.
GRANTS: dict[Scope, frozenset[str]] = {
    "admin": frozenset({"all", "start", "control", "read"}),
    "run": frozenset({"start", "control", "read"}),
    "read": frozenset({"read"}),
}
DEFAULT_TENANT = "default"


class Owner(msgspec.Struct, frozen=True, kw_only=True):
    """Who a run or thread belongs to, as its record keeps it (no credential, no scopes)."""

    subject: str
    tenant: str = DEFAULT_TENANT


class Quota(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a principal (or a tenant) may spend; None is no limit (docs/auth.md)."""

    concurrent_runs: int | None = None
    runs_per_minute: int | None = None
    events_per_day: int | None = None
    tokens_per_day: int | None = None


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """The identity a request acts as. Never carries the credential it was proven with."""

    subject: str
    tenant: str = DEFAULT_TENANT
    scopes: tuple[Scope, ...] = ("run",)
    name: str | None = None  # a display name (a key's name, a token's ``name`` claim)
    # How it was proven: "key", "jwt", "proxy", "token" or "local" (audit lines say so).
    via: str = "local"
    # Its own limits (an API key's, from the keys file); the operator's defaults otherwise.
    quota: Quota | None = None

    @property
    def owner(self) -> Owner:
        return Owner(subject=self.subject, tenant=self.tenant)

    def may(self, action: Literal["all", "start", "control", "read"]) -> bool:
        return any(action in GRANTS[scope] for scope in self.scopes)

    def sees(self, owner: Owner | None) -> bool:
        """Whether a run or thread of ``owner`` exists for this principal. One without an owner
        (recorded before owners were kept) is the admin's only."""
        if self.may("all"):
            return True
        return owner is not None and owner.subject == self.subject and owner.tenant == self.tenant


# The machine's own user: the stdio commands, a gateway on loopback with no credential
# configured (the development default), and the gateway's own background work.
LOCAL = Principal(subject="local", scopes=("admin",), name="local user", via="local")

CURRENT: ContextVar[Principal | None] = ContextVar("loopgate_principal", default=None)


def current() -> Principal:
    """The principal of the request being served, :data:`LOCAL` outside any request."""
    return CURRENT.get() or LOCAL


@contextmanager
def acting_as(principal: Principal) -> Iterator[None]:
    """Run a block as ``principal`` (the auth middleware wraps each request in one)."""
    token = CURRENT.set(principal)
    try:
        yield
    finally:
        CURRENT.reset(token)
