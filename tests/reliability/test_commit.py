"""The committed-seq watermark and group commit, in process, with the commit held at a gate."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import websockets.sync.client as ws_client

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.journal import SqliteJournal
from loopgate.gateway.settings import Settings
from tests.gateway.harness import running_gateway

pytestmark = pytest.mark.anyio


def delta(text: str) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": text})


def sqlite_hub(tmp_path: Path, **overrides: Any) -> Hub:
    db = f"sqlite:{tmp_path / 'journal.sqlite3'}"
    return build_hub(Settings(journal=db, workspace=str(tmp_path), **overrides))


class Gate:
    """Holds every commit of a journal until opened; counts them. Commits go to a worker
    thread (none on the event loop), where the gate can hold them."""

    def __init__(self, journal: SqliteJournal) -> None:
        journal._inline_size = lambda rows: None  # type: ignore[method-assign]
        self.open = threading.Event()
        self.entered = threading.Event()
        self.commits = 0
        write: Callable[..., None] = journal._write

        def gated(*args: Any) -> None:
            self.entered.set()
            self.open.wait(30)
            self.commits += 1
            write(*args)

        journal._write = gated  # type: ignore[method-assign]


def rows(tmp_path: Path, run_id: str) -> list[int]:
    with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
        found = conn.execute("SELECT seq FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [seq for (seq,) in found]


async def test_nothing_uncommitted_is_shown_or_acknowledged(tmp_path: Path) -> None:
    async with sqlite_hub(tmp_path) as hub:
        assert isinstance(hub.journal, SqliteJournal)
        run_id = (await hub.start(StartRun(source="ingest"))).id
        gate = Gate(hub.journal)
        pushed = anyio.Event()

        async def push() -> None:
            await hub.push(run_id, delta("held"))
            pushed.set()

        async with hub.subscribe(run_id) as sub, anyio.create_task_group() as tg:
            tg.start_soon(push)
            await anyio.to_thread.run_sync(gate.entered.wait, 10)
            # The event has its seq, but the commit is held: nobody may see it yet.
            assert hub.run(run_id).last_seq == 1
            assert await sub.next_batch(max_wait=0) == []
            assert (await hub.get(run_id)).last_seq == 0
            assert await hub.history(run_id) == []
            assert not pushed.is_set() and rows(tmp_path, run_id) == []
            gate.open.set()
            with anyio.fail_after(10):
                batch = await sub.next_batch()
                await pushed.wait()
            assert [e.data["delta"] for e in batch] == ["held"]
            assert rows(tmp_path, run_id) == [1]
            assert (await hub.get(run_id)).last_seq == 1
            # The end, held too: the run is not reported finished before it is committed.
            gate.open.clear()
            gate.entered.clear()
            tg.start_soon(hub.push, run_id, LoopEvent("completion", {"status": "completed"}))
            await anyio.to_thread.run_sync(gate.entered.wait, 10)
            info = await hub.get(run_id)
            assert (info.state, info.status, info.last_seq) == ("running", None, 1)
            assert await sub.next_batch(max_wait=0) == [] and not sub.done
            gate.open.set()
            with anyio.fail_after(10):
                assert [e.seq for e in await sub.next_batch()] == [2]
            info = await hub.get(run_id)
            assert (info.state, info.status, info.last_seq) == ("finished", "completed", 2)


async def test_pushes_during_a_commit_share_the_next_one(tmp_path: Path) -> None:
    async with sqlite_hub(tmp_path) as hub:
        assert isinstance(hub.journal, SqliteJournal)
        runs = [(await hub.start(StartRun(source="ingest"))).id for _ in range(20)]
        gate = Gate(hub.journal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hub.push, runs[0], delta("first"))
            await anyio.to_thread.run_sync(gate.entered.wait, 10)
            # 100 pushes arrive while the first commit is held.
            for i in range(100):
                tg.start_soon(hub.push, runs[i % 20], delta(str(i)))
            await anyio.wait_all_tasks_blocked()
            gate.open.set()
        # One commit for the first push, one for the hundred that waited (no fixed delay).
        assert gate.commits == 2
        assert sum(len(rows(tmp_path, r)) for r in runs) == 101


async def test_the_memory_journal_shows_events_at_once(tmp_path: Path) -> None:
    async with build_hub(Settings(workspace=str(tmp_path))) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        async with hub.subscribe(run_id) as sub:
            env = await hub.push_nowait(run_id, delta("now"))
            assert await sub.next_batch(max_wait=0) == [env]
            assert hub.run(run_id).committed == env.seq


async def test_the_wal_is_checkpointed_off_the_event_loop(tmp_path: Path) -> None:
    # Automatic checkpoints are off (they fsync inside a commit); the journal's own keep the
    # write-ahead log from growing with everything ever written.
    async with sqlite_hub(tmp_path) as hub:
        for _ in range(12):
            run_id = (await hub.start(StartRun(source="ingest"))).id
            for _ in range(64):
                env = await hub.push_nowait(run_id, delta("x" * 60_000))
            await hub.wait_committed(run_id, env.seq)
        written = 12 * 64 * 60_000
        wal = tmp_path / "journal.sqlite3-wal"
        assert wal.stat().st_size < written / 3, (wal.stat().st_size, written)


def test_the_ingest_websocket_acknowledges_committed_frames(tmp_path: Path) -> None:
    with running_gateway(journal=f"sqlite:{tmp_path / 'journal.sqlite3'}") as (base, _):
        run_id = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).json()["id"]
        url = base.replace("http", "ws") + f"/v1/runs/{run_id}/ingest?ack=1"
        with ws_client.connect(url) as ws:
            for i in range(1, 201):
                frame = {"kind": "content_delta", "data": {"delta": str(i)}}
                ws.send(json.dumps(frame if i != 100 else {"kind": 5}))  # 100 is rejected
            acks, errors = [], []
            while not acks or acks[-1]["frame"] < 200:
                message = json.loads(ws.recv(timeout=10))
                (acks if message["type"] == "ack" else errors).append(message)
            ws.send(json.dumps({"kind": "completion", "data": {"status": "completed"}}))
            end = json.loads(ws.recv(timeout=10))
        assert [e["frame"] for e in errors] == [100]
        frames = [a["frame"] for a in acks]
        assert frames == sorted(set(frames))  # each later than the one before
        # Frame n carries seq n before the rejected frame, n - 1 after it.
        assert all(a["seq"] == a["frame"] - (a["frame"] > 100) for a in acks)
        assert end == {"type": "end", "frame": 201, "seq": 200}
        stored = rows(tmp_path, run_id)
        assert stored == list(range(1, 201))
