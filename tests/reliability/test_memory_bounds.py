"""Memory bounded in bytes: per run, in total, per write; finished runs leave memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import RunGone, RunNotFound, RunTooLarge, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.journal import EVENT_OVERHEAD_BYTES
from loopgate.gateway.settings import Settings
from tests.gateway.harness import running_gateway

pytestmark = pytest.mark.anyio

KIB = 1024
DONE = LoopEvent("completion", {"status": "completed"})


def blob(n: int, tag: str = "") -> LoopEvent:
    """A content_delta whose payload encodes to about ``n`` bytes."""
    return LoopEvent("content_delta", {"delta": tag + "x" * (n - 13 - len(tag))})


def hub_for(tmp_path: Path, **overrides: Any) -> Hub:
    return build_hub(Settings(workspace=str(tmp_path), **overrides))


async def ingest(hub: Hub, events: list[LoopEvent]) -> str:
    run_id = (await hub.start(StartRun(source="ingest"))).id
    for event in events:
        await hub.push(run_id, event)
    return run_id


async def read_all(hub: Hub, run_id: str) -> list[list[Any]]:
    batches = []
    async with hub.subscribe(run_id) as sub:
        while not sub.done:
            batch = await sub.next_batch()
            if batch:
                batches.append(batch)
    return batches


async def test_the_memory_journal_drops_finished_runs_oldest_first_and_remembers(
    tmp_path: Path,
) -> None:
    limit = 400 * KIB
    async with hub_for(tmp_path, max_retained_bytes=limit) as hub:
        runs = []
        for _ in range(8):
            runs.append(await ingest(hub, [blob(20 * KIB) for _ in range(5)] + [DONE]))
            assert hub.stats().retained_bytes <= limit
            if len(runs) == 1:
                # Held here as an exception's traceback may hold it in the server.
                first = hub.run(runs[0])
        # Its events went when it was dropped, not when the last reference goes.
        assert first.events == [] and first.retained == 0
        # About 100 KiB each: the four newest fit, the oldest went first.
        kept = [r for r in runs if r in {i.id for i in await hub.list_runs()}]
        assert kept == runs[-len(kept) :] and 2 <= len(kept) < 8
        with pytest.raises(RunGone, match="max_retained_bytes"):
            await hub.get(runs[0])
        with pytest.raises(RunGone):
            await hub.history(runs[0])
        with pytest.raises(RunNotFound) as unknown:
            await hub.get("run_never_was")
        assert not isinstance(unknown.value, RunGone)
        assert [len(b) for b in await read_all(hub, runs[-1])] == [6]


async def test_a_run_past_its_own_bound_ends_and_others_go_on(tmp_path: Path) -> None:
    async with hub_for(tmp_path, max_run_retained_bytes=100 * KIB) as hub:
        big = (await hub.start(StartRun(source="ingest"))).id
        small = await ingest(hub, [blob(KIB)])
        with pytest.raises(RunTooLarge, match="bytes of events held for one run"):
            for _ in range(10):
                await hub.push(big, blob(20 * KIB))
        last = (await hub.history(big))[-1]
        assert (last.kind, last.data["status"], last.data["reason"]) == (
            "completion",
            "failed",
            "memory_limit",
        )
        assert hub.run(big).retained <= 100 * KIB
        await hub.push(small, DONE)
        assert (await hub.get(small)).status == "completed"


async def test_running_runs_over_the_total_end_the_one_that_pushes_past_it(
    tmp_path: Path,
) -> None:
    async with hub_for(tmp_path, max_retained_bytes=200 * KIB) as hub:
        first = await ingest(hub, [blob(50 * KIB) for _ in range(3)])
        second = await ingest(hub, [blob(30 * KIB)])
        with pytest.raises(RunTooLarge, match="held in memory"):
            await hub.push(second, blob(30 * KIB))
        assert (await hub.get(second)).status == "failed"
        assert (await hub.get(first)).state == "running"
        assert hub.stats().retained_bytes <= 200 * KIB + EVENT_OVERHEAD_BYTES


async def test_a_watched_finished_run_stays_until_its_reader_is_done(tmp_path: Path) -> None:
    async with hub_for(tmp_path, max_retained_bytes=150 * KIB) as hub:
        watched = await ingest(hub, [blob(50 * KIB), DONE])
        async with hub.subscribe(watched) as sub:
            for _ in range(3):
                await ingest(hub, [blob(40 * KIB), DONE])
            assert (await hub.get(watched)).state == "finished"
            assert [e.seq for e in await sub.next_batch()] == [1, 2]
        await ingest(hub, [blob(40 * KIB), DONE])
        with pytest.raises(RunGone):
            await hub.get(watched)


async def test_batches_are_bounded_in_bytes_and_a_bigger_event_goes_alone(
    tmp_path: Path,
) -> None:
    async with hub_for(tmp_path, max_batch_bytes=100 * KIB) as hub:
        sizes = [30 * KIB] * 7 + [250 * KIB] + [10 * KIB] * 3
        run_id = await ingest(hub, [blob(n) for n in sizes] + [DONE])
        batches = await read_all(hub, run_id)
        assert [len(b) for b in batches] == [3, 3, 1, 1, 4]
        assert [e.seq for b in batches for e in b] == list(range(1, 13))


async def test_sqlite_serves_finished_runs_from_the_journal_page_by_page(tmp_path: Path) -> None:
    db = f"sqlite:{tmp_path / 'journal.sqlite3'}"
    settings = {"journal": db, "max_retained_bytes": 300 * KIB, "max_batch_bytes": 64 * KIB}
    async with hub_for(tmp_path, **settings) as hub:
        runs = [await ingest(hub, [blob(20 * KIB, f"{i}:") for i in range(6)] + [DONE])]
        before = await read_all(hub, runs[0])
        for _ in range(4):
            runs.append(await ingest(hub, [blob(20 * KIB) for _ in range(6)] + [DONE]))
        # The oldest left memory but not the journal: same events, read back in pages.
        assert runs[0] not in [r.id for r in hub.table.hot_finished()]
        assert hub.stats().retained_bytes <= 300 * KIB
        after = await read_all(hub, runs[0])
        assert [e for b in after for e in b] == [e for b in before for e in b]
        assert [len(b) for b in after] == [3, 4]  # 64 KiB pages: 3 blobs, 3 and the end
        info = await hub.get(runs[0])
        assert (info.state, info.status, info.last_seq) == ("finished", "completed", 7)
        page = await hub.history(runs[0], after=2, limit=2)
        assert [e.seq for e in page] == [3, 4]
        async with hub.subscribe(runs[0], after=5) as sub:
            assert [e.seq for e in await sub.next_batch()] == [6, 7] and sub.done


def test_a_dropped_run_is_410_over_http_and_rpc_and_an_unknown_one_404() -> None:
    with (
        running_gateway(max_retained_bytes=64 * KIB) as (base, _),
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        ids = []
        for _ in range(4):
            run_id = client.post("/v1/runs", json={"source": "ingest"}).json()["id"]
            body = f'{{"kind":"content_delta","data":{{"delta":"{"x" * 30_000}"}}}}\n'
            assert client.post(f"/v1/runs/{run_id}/events?end=1", content=body).is_success
            ids.append(run_id)
        gone = client.get(f"/v1/runs/{ids[0]}")
        assert gone.status_code == 410
        assert gone.headers["content-type"] == "application/problem+json"
        assert "max_retained_bytes" in gone.json()["detail"]
        assert client.get(f"/v1/runs/{ids[0]}/events").status_code == 410
        assert client.get("/v1/runs/run_never_was").status_code == 404
        assert client.get(f"/v1/runs/{ids[-1]}").status_code == 200
        call = {"jsonrpc": "2.0", "id": 1, "method": "run.get", "params": {"runId": ids[0]}}
        error = client.post("/rpc", json=call).json()["error"]
        assert error["code"] == -32008 and error["data"]["runId"] == ids[0]
