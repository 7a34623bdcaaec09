"""Where runs are kept beyond the hub's memory."""

from gateway.journal.base import Journal, RunRecord
from gateway.journal.memory import MemoryJournal
from gateway.journal.sqlite import SqliteJournal


def open_journal(spec: str) -> Journal:
    """``memory`` or ``sqlite:PATH``."""
    if spec == "memory":
        return MemoryJournal()
    return SqliteJournal(spec.removeprefix("sqlite:"))


__all__ = ["Journal", "MemoryJournal", "RunRecord", "SqliteJournal", "open_journal"]
