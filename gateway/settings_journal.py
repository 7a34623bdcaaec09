"""The checks of the settings that say where runs live and who runs them (docs/scale.md): the
journal, the bus beside a PostgreSQL journal, and an instance's role."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .journal.base import POSTGRES_SCHEMES, REDIS_SCHEMES

if TYPE_CHECKING:
    from .settings import Settings

# Longer than any start takes is enough; a day bounds how long a crashed start's bytes stay.
MAX_ORPHAN_GRACE_S = 86_400.0


def check_journal_settings(s: Settings) -> None:
    """A ValueError saying what is wrong with ``journal``, ``bus`` or ``role``."""
    if s.attachment_orphan_grace_s > MAX_ORPHAN_GRACE_S:
        raise ValueError(
            f"attachment_orphan_grace_s must be at most {MAX_ORPHAN_GRACE_S:g} s (a day), "
            f"got {s.attachment_orphan_grace_s:g}"
        )
    schemes = ("sqlite:", *REDIS_SCHEMES, *POSTGRES_SCHEMES)
    if s.journal != "memory" and not s.journal.startswith(schemes):
        raise ValueError(
            "journal must be 'memory', 'sqlite:PATH', 'redis://HOST:PORT/DB', "
            "'redis+sentinel://HOST:PORT/SERVICE' or 'postgresql://…', "
            f"got {s.journal!r}"
        )
    if s.bus is not None:
        if not s.journal.startswith(POSTGRES_SCHEMES):
            raise ValueError("bus is for a PostgreSQL journal (--journal postgresql://…)")
        if not s.bus.startswith(REDIS_SCHEMES):
            raise ValueError(f"bus must be a Redis URL (redis://HOST:PORT/DB), got {s.bus!r}")
    shared = s.journal.startswith(REDIS_SCHEMES) or (
        s.journal.startswith(POSTGRES_SCHEMES) and s.bus is not None
    )
    if s.role != "all" and not shared:
        raise ValueError(
            f"role {s.role} needs a journal the instances share through a run queue "
            "(--journal redis://HOST:PORT/DB, or --journal postgresql://… with "
            f"--bus redis://HOST:PORT/DB), got {s.journal!r}"
            + (" without --bus" if s.journal.startswith(POSTGRES_SCHEMES) else "")
        )
    if s.role == "api" and not s.max_queued_runs:
        raise ValueError("role api queues every run it accepts: max_queued_runs must be at least 1")
