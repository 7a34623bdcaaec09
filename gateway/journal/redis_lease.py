"""When this instance may judge other instances lost, and what its own lease's lapse means to
the runs it owns (issue 33, R5; docs/scale.md: "A Redis that stalls").

A lease is a key that expires on Redis's clock. When Redis itself stalls (SIGSTOP, a long
fork, a restart) every lease can lapse at once — the reaper's own too — and whoever reads
first after it would end the runs of healthy instances before their renewals, queued behind
the stall, land. So a lapse is judged only by an instance that has seen Redis answer on time
for a whole lease: any sign of a stall — its own lease found lapsed, a renewal or a sweep that
took longer than a third of the lease, renewals further apart than two thirds of it — holds
judgement for one lease from then, which gives every live instance its renewals.

The owner side: an instance that finds its own lease had lapsed may have had runs ended by a
survivor meanwhile; it looks at once, instead of at its next commit (an idle run would wait
for good, and so would its clients).
"""

from __future__ import annotations

import anyio


class LeaseJudge:
    def __init__(self, lease_s: float) -> None:
        self.lease_s = lease_s
        self._hold_until = 0.0
        self._renewed_at: float | None = None
        # The runs this instance owns while they run, as its commits left them.
        self.owned: set[str] = set()

    def hold(self) -> None:
        """A stall was seen: judge nobody for one lease from now."""
        self._hold_until = anyio.current_time() + self.lease_s

    @property
    def may_judge(self) -> bool:
        return anyio.current_time() >= self._hold_until

    def timed(self, started: float) -> None:
        """A call to Redis that began at ``started`` has answered: too slow is a stall."""
        if anyio.current_time() - started > self.lease_s / 3:
            self.hold()

    def renewed(self, started: float, had_lease: bool) -> bool:
        """This instance's lease was renewed by a call begun at ``started``; ``had_lease``: it
        had not lapsed before. True when it had (and this is not the first renewal): what it
        owns must be looked at."""
        now = anyio.current_time()
        first = self._renewed_at is None
        late = not first and now - (self._renewed_at or now) > 2 * self.lease_s / 3
        self._renewed_at = now
        self.timed(started)
        if late or (not first and not had_lease):
            self.hold()
        return not first and not had_lease
