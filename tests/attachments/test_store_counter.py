"""The SQLite store's bytes are a counter, not a sum at each start: a database written before
the counter existed gets it from its blobs when opened, and keeps it from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio

from loopgate.gateway.journal.sqlite import SqliteJournal


def test_a_database_from_before_the_counter_gets_it_from_its_blobs(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.db")

    async def opened() -> tuple[int, int]:
        journal = SqliteJournal(path)
        await journal.open()
        try:
            await journal.blobs.keep("later", {"sha256:b": b"12345"}, 1 << 20)
            return await journal.blobs.usage()
        finally:
            await journal.aclose()

    assert anyio.run(opened) == (1, 5)
    with sqlite3.connect(path) as conn:  # as an older loopgate left it: no counter
        conn.execute("INSERT INTO blobs VALUES ('sha256:a', x'00', 1000)")
        conn.execute("DROP TABLE blob_usage")
    assert anyio.run(opened) == (2, 1005)
