"""Thread records in the hub and its journals: recorded before any run, bounded, durable."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from loopgate.contracts.ports import ThreadExists
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.journal import MemoryJournal, RunRecord
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio


def hub_for(tmp_path: Path, **overrides: Any) -> Hub:
    return build_hub(Settings(scripted_delay_s=0.0, workspace=str(tmp_path), **overrides))


@pytest.mark.parametrize("journal", ["memory", "sqlite"])
async def test_create_get_list_forget(tmp_path: Path, journal: str) -> None:
    spec = "memory" if journal == "memory" else f"sqlite:{tmp_path / 'j.db'}"
    async with hub_for(tmp_path, journal=spec) as hub:
        first = await hub.create_thread("sess_1", metadata={"acp": {"cwd": "/a"}})
        second = await hub.create_thread()
        assert second.id.startswith("thread_") and second.metadata == {}
        assert await hub.get_thread("sess_1") == first
        assert first.metadata == {"acp": {"cwd": "/a"}} and first.created_at > 0
        assert [t.id for t in await hub.list_threads()] == [second.id, "sess_1"]
        assert [t.id for t in await hub.list_threads(limit=1)] == [second.id]
        with pytest.raises(ThreadExists):
            await hub.create_thread("sess_1")
        assert await hub.forget_thread("sess_1") is True
        assert await hub.forget_thread("sess_1") is False
        assert await hub.get_thread("sess_1") is None
        assert await hub.get_thread("never") is None
        assert [t.id for t in await hub.list_threads()] == [second.id]
        # Recorded again after being forgotten: a new record.
        assert (await hub.create_thread("sess_1")).metadata == {}


async def test_sqlite_threads_outlive_the_process(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'j.db'}"
    async with hub_for(tmp_path, journal=spec) as hub:
        kept = await hub.create_thread("kept", metadata={"acp": {"cwd": "/k"}})
        await hub.create_thread("forgotten")
        await hub.forget_thread("forgotten")
    async with hub_for(tmp_path, journal=spec) as hub:
        assert await hub.get_thread("kept") == kept
        assert await hub.get_thread("forgotten") is None
        assert [t.id for t in await hub.list_threads()] == ["kept"]


@pytest.mark.parametrize("journal", ["memory", "sqlite"])
async def test_threads_are_bounded_by_max_runs_oldest_first(tmp_path: Path, journal: str) -> None:
    spec = "memory" if journal == "memory" else f"sqlite:{tmp_path / 'j.db'}"
    async with hub_for(tmp_path, journal=spec, max_runs=3) as hub:
        for i in range(5):
            await hub.create_thread(f"t{i}")
        assert [t.id for t in await hub.list_threads()] == ["t4", "t3", "t2"]
        assert await hub.get_thread("t1") is None
        assert await hub.get_thread("t2") is not None


async def test_threads_older_than_max_run_age_are_forgotten(tmp_path: Path) -> None:
    now = [1_000 * 10**9]
    settings = Settings(scripted_delay_s=0.0, workspace=str(tmp_path), max_run_age_s=60.0)
    async with Hub(settings, MemoryJournal(), {}, clock=lambda: now[0]) as hub:
        await hub.create_thread("old")
        now[0] += 30 * 10**9
        await hub.create_thread("younger")
        now[0] += 31 * 10**9  # "old" is 61 s old now, "younger" 31 s
        await hub.create_thread("new")
        assert [t.id for t in await hub.list_threads()] == ["new", "younger"]


# The journal schema before thread records: a file written by an older loopgate.
OLD_SCHEMA = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    record BLOB NOT NULL,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX runs_thread ON runs (thread_id, created_at);
CREATE TABLE events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""


async def test_a_journal_file_without_the_threads_table_opens_and_gets_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    now = time.time_ns()
    record = RunRecord(
        id="run_old",
        thread_id="sess_old",
        source="loop",
        state="finished",
        status="completed",
        created_at=now,
        finished_at=now,
        last_seq=1,
    )
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        conn.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?)",
            ("run_old", "sess_old", msgspec.json.encode(record), "finished", now, now),
        )
        conn.execute(
            "INSERT INTO events VALUES (?,?,?,?,?)",
            ("run_old", 1, now, "completion", b'{"status":"completed"}'),
        )
    conn.close()
    spec = f"sqlite:{path}"
    async with hub_for(tmp_path, journal=spec) as hub:
        assert [r.id for r in await hub.list_runs(thread_id="sess_old")] == ["run_old"]
        assert [e.kind for e in await hub.history("run_old")] == ["completion"]
        assert await hub.list_threads() == []
        await hub.create_thread("sess_new", metadata={"acp": {"cwd": "/n"}})
    async with hub_for(tmp_path, journal=spec) as hub:
        assert [t.id for t in await hub.list_threads()] == ["sess_new"]
        assert [r.id for r in await hub.list_runs()] == ["run_old"]
