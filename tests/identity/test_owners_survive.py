"""Owners are kept in the journal: runs and threads alice started on a durable journal (SQLite,
Redis, PostgreSQL) are still hers after the gateway restarts, and her listing finds them
however many of other people's runs are newer (the Redis journal reads its index a page at a
time)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from loopgate.contracts.principal import Owner
from loopgate.gateway.hub.run import new_record
from loopgate.gateway.journal import open_journal
from loopgate.gateway.journal.base import Journal, RunRecord
from loopgate.gateway.journal.redis_streams import OWNER_PAGE
from tests.gateway.harness import gateway_process
from tests.identity.principals import write_test_keys
from tests.postgres.conftest import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.redis.conftest import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.waiting import wait_until

ALICE = Owner(subject="alice", tenant="acme")
BOB = Owner(subject="bob", tenant="globex")
# More of bob's runs, all newer than alice's, than one page of the Redis index holds.
OTHERS_NEWER = OWNER_PAGE + 100


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def journal_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'journal.db'}"
    elif request.param == "postgres":
        yield request.getfixturevalue("postgres_url")
    else:
        yield request.getfixturevalue("redis_url")


def finished(owner: Owner, n: int, created_at: int) -> RunRecord:
    record = new_record(f"{owner.subject}-{n}", f"t-{owner.subject}-{n}", "ingest", created_at, {})
    record.state, record.status, record.finished_at = "finished", "completed", created_at
    record.owner = owner
    return record


async def record_runs(spec: str, records: list[RunRecord]) -> None:
    journal: Journal = open_journal(spec)
    await journal.open()
    try:
        for record in records:
            journal.record_run(record)
        await journal.flush()
    finally:
        await journal.aclose()


async def listed(spec: str, limit: int, owner: Owner | None) -> list[str]:
    journal: Journal = open_journal(spec)
    await journal.open()
    try:
        return [r.id for r in await journal.list_runs(limit, owner=owner)]
    finally:
        await journal.aclose()


def wait_finished(http: httpx.Client, run_id: str, headers: dict[str, str]) -> None:
    def state() -> str:
        found: str = http.get(f"/v1/runs/{run_id}", headers=headers).json()["state"]
        return found

    wait_until(lambda: state() == "finished", 20, "the run to finish")


def test_runs_and_threads_keep_their_owner_across_a_restart(
    tmp_path: Path, journal_spec: str
) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    alice, bob, root = keys["alice"], keys["bob"], keys["root"]
    flags = ("--journal", journal_spec, "--keys-file", str(tmp_path / "keys.json"))
    flags += ("--scripted-delay", "0")
    with gateway_process(*flags) as (base, _), httpx.Client(base_url=base, timeout=10) as http:
        started = http.post("/v1/runs", json={"input": "hi"}, headers=alice.headers)
        assert started.status_code in (200, 201), started.text
        run_id, thread_id = started.json()["id"], started.json()["thread_id"]
        wait_finished(http, run_id, alice.headers)
        made = http.post("/v1/threads", json={}, headers=alice.headers)
        assert made.status_code in (200, 201), made.text
        recorded_thread = made.json()["id"]

    # Bob's runs, all newer than alice's, more than one page of them.
    now = time.time_ns()
    anyio.run(record_runs, journal_spec, [finished(BOB, n, now + n) for n in range(OTHERS_NEWER)])

    with gateway_process(*flags) as (base, _), httpx.Client(base_url=base, timeout=10) as http:
        for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events?stream=false"):
            assert http.get(path, headers=bob.headers).status_code == 404, path
            assert http.get(path, headers=alice.headers).status_code == 200, path
            assert http.get(path, headers=root.headers).status_code == 200, path
        assert http.get(f"/v1/runs/{run_id}", headers=alice.headers).json()["owner"] == {
            "subject": "alice",
            "tenant": "acme",
        }
        assert http.post(f"/v1/runs/{run_id}/cancel", headers=bob.headers).status_code == 404
        # Bob cannot continue alice's thread after the restart either.
        cont = http.post(
            "/v1/runs", json={"input": "more", "thread_id": thread_id}, headers=bob.headers
        )
        assert cont.status_code == 404, cont.text

        mine = http.get("/v1/runs", headers=alice.headers).json()["runs"]
        assert [r["id"] for r in mine] == [run_id]
        his = http.get("/v1/runs?limit=50", headers=bob.headers).json()["runs"]
        assert len(his) == 50 and all(r["owner"]["subject"] == "bob" for r in his)
        everyone = http.get("/v1/runs?limit=50", headers=root.headers).json()["runs"]
        assert run_id not in [r["id"] for r in everyone]  # the 50 newest are bob's

        path = f"/v1/threads/{recorded_thread}"
        assert http.get(path, headers=bob.headers).status_code == 404
        assert http.get(path, headers=alice.headers).status_code == 200
        threads = http.get("/v1/threads", headers=alice.headers).json()["threads"]
        assert [t["id"] for t in threads] == [recorded_thread]
        assert http.get("/v1/threads", headers=bob.headers).json()["threads"] == []


@pytest.mark.anyio
async def test_an_owners_listing_reaches_past_pages_of_newer_runs(journal_spec: str) -> None:
    """Alice's runs sit at the oldest end, on a page boundary and between bob's: her listing
    has them newest first, as many as asked."""
    now = time.time_ns()
    total = 2 * OWNER_PAGE + 50
    alices = {0, OWNER_PAGE - 1, OWNER_PAGE, 2 * OWNER_PAGE + 10}
    records = [finished(ALICE if n in alices else BOB, n, now + n) for n in range(total)]
    await record_runs(journal_spec, records)
    newest_first = [f"alice-{n}" for n in sorted(alices, reverse=True)]
    assert await listed(journal_spec, 10, ALICE) == newest_first
    assert await listed(journal_spec, 2, ALICE) == newest_first[:2]
    assert await listed(journal_spec, 3, Owner(subject="alice", tenant="other")) == []
    bobs = await listed(journal_spec, OWNER_PAGE + 5, BOB)
    assert len(bobs) == OWNER_PAGE + 5 and not any(i.startswith("alice") for i in bobs)
    assert len(await listed(journal_spec, 7, None)) == 7
