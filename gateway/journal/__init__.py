"""Where runs are kept beyond the hub's memory."""

from loopgate.gateway.journal.base import EVENT_OVERHEAD_BYTES, Journal, RunRecord
from loopgate.gateway.journal.memory import MemoryJournal
from loopgate.gateway.journal.sqlite import SqliteJournal, Synchronous


def open_journal(spec: str, *, synchronous: Synchronous = "normal") -> Journal:
    """``memory`` or ``sqlite:PATH``; ``synchronous`` is SQLite's (``normal`` or ``full``)."""
    if spec == "memory":
        return MemoryJournal()
    return SqliteJournal(spec.removeprefix("sqlite:"), synchronous=synchronous)


__all__ = [
    "EVENT_OVERHEAD_BYTES",
    "Journal",
    "MemoryJournal",
    "RunRecord",
    "SqliteJournal",
    "open_journal",
]
