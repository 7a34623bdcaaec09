"""Quotas: what each principal, and each tenant, may spend (docs/auth.md#quotas).

Four limits, each for a principal (subject and tenant) and for its tenant as a whole: runs
going at once, run starts in the last minute (a sliding window), events and model tokens per
UTC day. A principal's own limits (an API key's ``quota``) win over the operator's defaults
(``quota_*``); a tenant's are ``tenant_quota_*``; 0 is no limit. Admins are counted like anyone.

Every start passes :meth:`Quotas.admit` (one of the hub's ``admission`` checks) before anything
is recorded: over a limit, it is refused with :class:`QuotaExceeded` (each protocol's rate-limit
shape). Admitted, the start takes a concurrency slot, bound to its run, given back when the run
ends however it ends (refunded when the start is refused after all). Events (the run's count, at
its end) and tokens (each ``llm_response``'s usage, as it comes) are added to the day's counters;
the day's totals are checked at start only, so a run that started under them finishes.

The counters live in a :class:`Ledger`: this process's memory (:class:`MemoryLedger`), or the
Redis the journal shares with the other instances (gateway/identity/quota_redis.py).
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import msgspec

from ...contracts.envelope import Envelope
from ...contracts.ports import QuotaExceeded
from ...contracts.principal import Principal
from .audit import audit

if TYPE_CHECKING:
    from ..hub.run import Run
    from ..journal.base import Journal
    from ..settings import Settings

log = logging.getLogger("loopgate.quotas")

QuotaName = Literal["concurrent_runs", "runs_per_minute", "events_per_day", "tokens_per_day"]
QUOTAS: tuple[QuotaName, ...] = (
    "concurrent_runs",
    "runs_per_minute",
    "events_per_day",
    "tokens_per_day",
)
WINDOW_S = 60.0  # runs_per_minute: the starts of the last this many seconds count
DAY_S = 86_400
# A run going at once ends when it ends: a client is told to ask again in this many seconds.
CONCURRENT_RETRY_S = 1
_UNITS: dict[QuotaName, str] = {
    "concurrent_runs": "runs going at once",
    "runs_per_minute": "runs started in any minute",
    "events_per_day": "events in a UTC day",
    "tokens_per_day": "model tokens in a UTC day",
}
# The kind whose usage counts as tokens, and its fields (the contract's llm_response).
RESPONSE = "llm_response"
_OBSERVED = frozenset({RESPONSE})


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """One party's limits; 0 is no limit."""

    concurrent_runs: int = 0
    runs_per_minute: int = 0
    events_per_day: int = 0
    tokens_per_day: int = 0

    @property
    def any(self) -> bool:
        return any(getattr(self, name) for name in QUOTAS)

    @property
    def daily(self) -> bool:
        """Whether the day's events and tokens are counted for this party."""
        return bool(self.events_per_day or self.tokens_per_day)

    def of(self, name: QuotaName) -> int:
        value: int = getattr(self, name)
        return value


def principal_defaults(settings: Settings) -> Limits:
    """The operator's per-principal limits (``quota_*``); ValueError for a negative one."""
    return _limits(settings, "quota_")


def tenant_limits(settings: Settings) -> Limits:
    """The operator's per-tenant limits (``tenant_quota_*``)."""
    return _limits(settings, "tenant_quota_")


def _limits(settings: Settings, prefix: str) -> Limits:
    chosen: dict[str, int] = {}
    for name in QUOTAS:
        value = chosen[name] = getattr(settings, prefix + name)
        if value < 0:
            raise ValueError(f"{prefix}{name} must be 0 (no limit) or more, got {value}")
    return Limits(**chosen)


def limits_of(principal: Principal, defaults: Limits) -> Limits:
    """The principal's own limits where its quota sets them (0 there: none for it), the
    operator's defaults for the rest."""
    own = principal.quota
    if own is None:
        return defaults
    chosen: dict[str, int] = {}
    for name in QUOTAS:
        mine = getattr(own, name)
        # A negative one is no limit of its own (never "none at all"): the default holds.
        chosen[name] = mine if mine is not None and mine >= 0 else defaults.of(name)
    return Limits(**chosen)


class Party(NamedTuple):
    """Who is counted: a principal (``subject`` set) or a whole tenant (``subject`` None)."""

    tenant: str
    subject: str | None
    limits: Limits


@dataclass(slots=True, eq=False)
class Hold:
    """One admitted start: its principal's and tenant's parties, and what it took from each."""

    principal: Party
    tenant: Party
    # Unique: the member of the shared counters' sets (a slot, a start).
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: float = 0.0
    released: bool = False

    @property
    def parties(self) -> tuple[Party, Party]:
        return (self.principal, self.tenant)


class Refusal(NamedTuple):
    """The first quota a start is over: whose, which, and in how many seconds to ask again."""

    party: Party
    quota: QuotaName
    retry_after: int


class Ledger(Protocol):
    """Where the counters live. ``admit`` checks every limit of both parties and, when none
    is reached, takes a slot and a start for the hold, all at once; ``release`` and ``spend``
    are called from the hub's hot path (a run's end, its events) and never block."""

    async def admit(self, hold: Hold) -> Refusal | None: ...

    async def refund(self, hold: Hold) -> None: ...

    def release(self, hold: Hold) -> None: ...

    def spend(self, hold: Hold, events: int, tokens: int) -> None: ...

    async def serve(self) -> None: ...


def utc_day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def until_tomorrow(now: float) -> int:
    """Whole seconds until the next UTC midnight (at least 1)."""
    return max(math.ceil(DAY_S - now % DAY_S), 1)


def tokens_in(data: dict[str, Any]) -> int:
    """An ``llm_response``'s tokens: its ``totalTokens``, else prompt plus completion (a count
    is a non-negative integer; anything else is none)."""
    total = data.get("totalTokens")
    if type(total) is int and total >= 0:
        return total
    counted = 0
    for name in ("promptTokens", "completionTokens"):
        n = data.get(name)
        if type(n) is int and n >= 0:
            counted += n
    return counted


def refusal_detail(refusal: Refusal) -> str:
    party, name = refusal.party, refusal.quota
    whose = "this principal" if party.subject is not None else f"tenant {party.tenant!r}"
    limit = party.limits.of(name)
    when = (
        f"retry once one of them ends (in {refusal.retry_after} s)"
        if name == "concurrent_runs"
        else f"retry in {refusal.retry_after} s"
    )
    return f"quota exceeded: {name} of {whose} is {limit} ({_UNITS[name]}); {when}"


class Quotas:
    """The hub's admission check for quotas, over a ledger."""

    def __init__(self, ledger: Ledger, defaults: Limits, tenants: Limits) -> None:
        self.ledger = ledger
        self.defaults = defaults
        self.tenants = tenants

    async def admit(self, principal: Principal) -> _Ticket | None:
        mine = limits_of(principal, self.defaults)
        if not mine.any and not self.tenants.any:
            return None  # nothing to count: no ledger work at all
        hold = Hold(
            principal=Party(principal.tenant, principal.subject, mine),
            tenant=Party(principal.tenant, None, self.tenants),
        )
        refusal = await self.ledger.admit(hold)
        if refusal is not None:
            audit(
                "quota_exceeded",
                principal,
                quota=refusal.quota,
                scope="principal" if refusal.party.subject is not None else "tenant",
            )
            raise QuotaExceeded(refusal_detail(refusal), retry_after=refusal.retry_after)
        return _Ticket(self.ledger, hold)


class _Ticket:
    """An admitted start's hold, as the hub's Ticket: bound to its run, released at its end."""

    __slots__ = ("hold", "ledger")

    def __init__(self, ledger: Ledger, hold: Hold) -> None:
        self.ledger = ledger
        self.hold = hold

    def bind(self, run: Run) -> None:
        run.on_finish.append(self._finished)
        if self.hold.principal.limits.daily or self.hold.tenant.limits.daily:
            run.observers.append(self._observe)
            run.want(self, _OBSERVED)

    async def refund(self) -> None:
        await self.ledger.refund(self.hold)

    def _finished(self, run: Run) -> None:
        try:
            self.ledger.release(self.hold)
            if self.hold.principal.limits.daily or self.hold.tenant.limits.daily:
                self.ledger.spend(self.hold, run.last_seq, 0)
        except Exception:  # a run's end hook may not raise
            log.exception("quotas: the end of run %s was not counted", run.id)

    def _observe(self, env: Envelope) -> None:
        if env.kind != RESPONSE:
            return
        try:
            tokens = tokens_in(env.data)
            if tokens:
                self.ledger.spend(self.hold, 0, tokens)
        except Exception:  # an observer may not raise
            log.exception("quotas: the tokens of run %s were not counted", env.run_id)


class MemoryLedger:
    """The counters of one gateway process (no journal other instances share)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._active: dict[tuple[str, str | None], int] = {}
        self._starts: dict[tuple[str, str | None], deque[float]] = {}
        self._swept = 0.0
        self._day = ""
        # (tenant, subject or None) → [events, tokens] of ``_day``
        self._daily: dict[tuple[str, str | None], list[int]] = {}

    async def admit(self, hold: Hold) -> Refusal | None:
        now = self.clock()
        self._roll(now)
        if now - self._swept >= WINDOW_S:
            # Windows of parties that started nothing since: gone, so that many principals
            # that each started once (JWT subjects) do not stay in memory for good.
            self._swept = now
            stale = now - WINDOW_S
            for key in [
                k for k, starts in self._starts.items() if not starts or starts[-1] <= stale
            ]:
                del self._starts[key]
        for party in hold.parties:
            refusal = self._check(party, now)
            if refusal is not None:
                return refusal
        hold.started_at = now
        for party in hold.parties:
            key = (party.tenant, party.subject)
            if party.limits.concurrent_runs:
                self._active[key] = self._active.get(key, 0) + 1
            if party.limits.runs_per_minute:
                self._starts.setdefault(key, deque()).append(now)
        return None

    def _check(self, party: Party, now: float) -> Refusal | None:
        key, limits = (party.tenant, party.subject), party.limits
        if limits.concurrent_runs and self._active.get(key, 0) >= limits.concurrent_runs:
            return Refusal(party, "concurrent_runs", CONCURRENT_RETRY_S)
        if limits.runs_per_minute:
            starts = self._starts.get(key)
            if starts is not None:
                while starts and starts[0] <= now - WINDOW_S:
                    starts.popleft()
                if not starts:
                    del self._starts[key]
                elif len(starts) >= limits.runs_per_minute:
                    retry = max(math.ceil(starts[0] + WINDOW_S - now), 1)
                    return Refusal(party, "runs_per_minute", retry)
        spent = self._daily.get(key)
        if spent is not None:
            if limits.events_per_day and spent[0] >= limits.events_per_day:
                return Refusal(party, "events_per_day", until_tomorrow(now))
            if limits.tokens_per_day and spent[1] >= limits.tokens_per_day:
                return Refusal(party, "tokens_per_day", until_tomorrow(now))
        return None

    def _roll(self, now: float) -> None:
        day = utc_day(now)
        if day != self._day:
            self._day = day
            self._daily.clear()

    async def refund(self, hold: Hold) -> None:
        self.release(hold)
        for party in hold.parties:
            starts = self._starts.get((party.tenant, party.subject))
            if party.limits.runs_per_minute and starts is not None:
                with suppress(ValueError):  # out of the window already
                    starts.remove(hold.started_at)

    def release(self, hold: Hold) -> None:
        if hold.released:
            return
        hold.released = True
        for party in hold.parties:
            if party.limits.concurrent_runs:
                key = (party.tenant, party.subject)
                left = self._active.get(key, 0) - 1
                if left > 0:
                    self._active[key] = left
                else:
                    self._active.pop(key, None)

    def spend(self, hold: Hold, events: int, tokens: int) -> None:
        self._roll(self.clock())
        for party in hold.parties:
            if party.limits.daily:
                spent = self._daily.setdefault((party.tenant, party.subject), [0, 0])
                spent[0] += events
                spent[1] += tokens

    async def serve(self) -> None:
        return  # nothing in the background: every count is done as it happens


def build_quotas(settings: Settings, journal: Journal) -> Quotas:
    """The quotas the settings ask for, counted where the journal is: in the Redis it shares
    with other instances, else in this process."""
    ledger: Ledger
    if journal.cluster is not None:
        # Imported only here: Redis is needed only when the journal is in it (the one
        # journal instances share).
        from ..journal.redis_membership import RedisMembership
        from .quota_redis import RedisLedger

        assert isinstance(journal.cluster, RedisMembership)
        ledger = RedisLedger(journal.cluster.link)
    else:
        ledger = MemoryLedger()
    return Quotas(ledger, principal_defaults(settings), tenant_limits(settings))
