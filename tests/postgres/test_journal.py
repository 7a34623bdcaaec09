"""The PostgreSQL journal on a real server: what it commits it serves back, its schema is
versioned, retention removes every row it owns, and a run another instance ended refuses the
next commit of its old owner (two instances never both append to one run)."""

from __future__ import annotations

import time

import anyio
import psycopg
import pytest

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.ports import ThreadInfo, Unavailable
from loopgate.contracts.principal import Owner
from loopgate.gateway.hub.run import new_record
from loopgate.gateway.journal import open_journal
from loopgate.gateway.journal.postgres import PostgresJournal
from loopgate.gateway.journal.postgres_link import MIGRATIONS

pytestmark = pytest.mark.anyio


def event(run_id: str, seq: int) -> Envelope:
    return Envelope(run_id, seq, time.time_ns(), "content_delta", {"delta": f"d{seq}"})


def record(journal: PostgresJournal, run_id: str, seq: int) -> None:
    env = event(run_id, seq)
    journal.record_event(env, b'{"delta":"d%d"}' % seq)


def schema_of(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


def count(url: str, sql: str) -> int:
    base, schema = url.split("?schema=")
    with psycopg.connect(base) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


async def test_committed_runs_events_and_threads_are_read_back(postgres_url: str) -> None:
    journal = open_journal(postgres_url)
    assert isinstance(journal, PostgresJournal)
    assert await journal.open() == []
    try:
        alice = Owner(subject="alice", tenant="acme")
        run = new_record("r1", "t1", "ingest", time.time_ns(), {"k": "v"})
        run.owner = alice
        journal.record_run(run)
        for seq in range(1, 11):
            record(journal, "r1", seq)
        journal.record_thread(ThreadInfo(id="t1", created_at=time.time_ns(), owner=alice))
        await journal.flush()
        loaded = await journal.load_run("r1")
        assert loaded is not None and loaded.last_seq == 10 and loaded.owner == alice
        assert loaded.metadata == {"k": "v"}
        events = await journal.load_events("r1", after=3, limit=4)
        assert [e.seq for e in events] == [4, 5, 6, 7]
        assert events[0].data == {"delta": "d4"}
        assert [e.seq for e in await journal.load_events("r1", max_bytes=1)] == [1]
        assert [r.id for r in await journal.list_runs(10, owner=alice)] == ["r1"]
        assert await journal.list_runs(10, owner=Owner(subject="bob")) == []
        assert [r.id for r in await journal.list_runs(10, thread_id="t1")] == ["r1"]
        assert [t.id for t in await journal.list_threads(10, owner=alice)] == ["t1"]
        # A resent batch (its answer lost) inserts nothing twice.
        for seq in range(9, 13):
            record(journal, "r1", seq)
        await journal.flush()
        assert [e.seq for e in await journal.load_events("r1")] == list(range(1, 13))
    finally:
        await journal.aclose()


async def test_text_postgres_refuses_is_committed_and_found(postgres_url: str) -> None:
    """NUL, which PostgreSQL's text refuses and the gateway lets through in ids and kinds,
    never wedges the commits: the run is committed, and found by the id it was given."""
    journal = open_journal(postgres_url)
    await journal.open()
    try:
        journal.record_run(new_record("a\x00b", "t\x00", "ingest", time.time_ns(), {}))
        journal.record_event(Envelope("a\x00b", 1, time.time_ns(), "k\x00", {}), b"{}")
        journal.record_run(new_record("plain", "t", "ingest", time.time_ns(), {}))
        with anyio.fail_after(10):
            await journal.flush()
        assert (await journal.load_run("a\x00b")) is not None
        assert [e.seq for e in await journal.load_events("a\x00b")] == [1]
        assert [r.id for r in await journal.list_runs(10, thread_id="t\x00")] == ["a\x00b"]
    finally:
        await journal.aclose()


async def test_a_restarted_journal_returns_the_runs_left_running(postgres_url: str) -> None:
    first = open_journal(postgres_url)
    await first.open()
    first.record_run(new_record("left", "t", "ingest", time.time_ns(), {}))
    await first.flush()
    await first.aclose()
    second = open_journal(postgres_url)
    try:
        assert [r.id for r in await second.open()] == ["left"]
    finally:
        await second.aclose()


async def test_retention_removes_every_row_of_a_dropped_run_and_thread(postgres_url: str) -> None:
    journal = open_journal(postgres_url)
    await journal.open()
    try:
        now = time.time_ns()
        for n in range(5):
            run = new_record(f"r{n}", f"t{n}", "ingest", now + n, {})
            run.state, run.status, run.finished_at = "finished", "completed", now + n
            journal.record_run(run)
            journal.record_thread(ThreadInfo(id=f"t{n}", created_at=now + n))
            for seq in range(1, 4):
                record(journal, f"r{n}", seq)  # type: ignore[arg-type]
        await journal.flush()
        doomed = await journal.prune(keep=2, older_than_ns=0)
        assert sorted(doomed) == ["r0", "r1", "r2"]
        await journal.prune_threads(keep=2, older_than_ns=0)
        assert count(postgres_url, "SELECT count(*) FROM runs") == 2
        assert count(postgres_url, "SELECT count(*) FROM events") == 6
        assert count(postgres_url, "SELECT count(*) FROM threads") == 2
        assert count(postgres_url, "SELECT count(*) FROM events WHERE run_id = 'r0'") == 0
        assert await journal.forget_thread("t4") and not await journal.forget_thread("t4")
    finally:
        await journal.aclose()


async def test_the_schema_is_versioned_and_a_newer_one_is_refused(postgres_url: str) -> None:
    for _ in range(2):  # migrated once; opened again, nothing to do
        journal = open_journal(postgres_url)
        await journal.open()
        await journal.aclose()
    sql = "SELECT max(version) FROM loopgate_schema"
    assert count(postgres_url, sql) == len(MIGRATIONS)
    assert count(postgres_url, "SELECT count(*) FROM loopgate_schema") == len(MIGRATIONS)
    base, schema = postgres_url.split("?schema=")
    with psycopg.connect(base) as conn:
        conn.execute(f'INSERT INTO "{schema}".loopgate_schema VALUES (%s)', (len(MIGRATIONS) + 1,))
    with pytest.raises(ValueError, match="newer than this loopgate knows"):
        await open_journal(postgres_url).open()


async def test_no_server_is_a_clear_error_within_the_connect_timeout() -> None:
    from tests.gateway.harness import free_port

    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?connect_timeout=1&pool_timeout=1"
    with anyio.fail_after(15), pytest.raises(ValueError) as refused:
        await open_journal(url).open()
    assert "PostgreSQL at 127.0.0.1" in str(refused.value) and "does not answer" in str(
        refused.value
    )


async def test_a_read_past_the_statement_timeout_is_unavailable(postgres_url: str) -> None:
    journal = open_journal(postgres_url + "&statement_timeout=0.5")
    await journal.open()
    base, schema = postgres_url.split("?schema=")
    try:
        with psycopg.connect(base) as blocker, blocker.transaction():
            # Another session holds the table: the read waits, up to the statement timeout.
            blocker.execute(f'LOCK TABLE "{schema}".events IN ACCESS EXCLUSIVE MODE')
            started = anyio.current_time()
            with anyio.fail_after(10), pytest.raises(Unavailable) as away:
                await journal.load_events("r1")
            assert anyio.current_time() - started < 5
        assert "PostgreSQL" in str(away.value)
        assert await journal.load_events("r1") == []  # and the next read is served
    finally:
        await journal.aclose()


async def test_a_run_another_instance_ended_refuses_its_old_owners_commits(
    postgres_url: str, redis_url: str
) -> None:
    journal = open_journal(postgres_url, bus=redis_url)
    assert isinstance(journal, PostgresJournal)
    lost: list[str] = []
    await journal.open()
    try:
        journal.cluster.on_lost = lost.append
        journal.record_run(new_record("r1", "t1", "ingest", time.time_ns(), {}))
        record(journal, "r1", 1)
        await journal.flush()
        base, schema = postgres_url.split("?schema=")
        with psycopg.connect(base) as conn:
            conn.execute(f"UPDATE \"{schema}\".runs SET instance = 'another' WHERE id = 'r1'")
        record(journal, "r1", 2)
        await journal.flush()
        assert lost == ["r1"]
        assert [e.seq for e in await journal.load_events("r1")] == [1]
    finally:
        await journal.aclose()
