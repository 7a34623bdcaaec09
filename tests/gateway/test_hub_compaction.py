"""Finished runs compacted: the same envelopes as before, byte bounds, readers mid-way, drops."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from loopgate.adapters.shared.sse import envelope_frames
from loopgate.contracts.encoded import EncodedEnvelopes
from loopgate.contracts.envelope import Envelope, LoopEvent, encode_envelope
from loopgate.contracts.ports import RunGone, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub, Run
from loopgate.gateway.hub import budget as budget_module
from loopgate.gateway.hub.compact import CompactEvents
from loopgate.gateway.journal import EVENT_OVERHEAD_BYTES
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio

DONE = LoopEvent("completion", {"status": "completed"})
# Payloads a compaction must carry through as they are: unicode, escapes, nesting, odd types,
# an unknown kind, an empty object.
ODD = [
    LoopEvent("content_delta", {"delta": 'héllo \u2028 "quoted" \\ \n tab\t'}),
    LoopEvent("tool_call_start", {"id": "c1", "name": "f", "arguments": {"a": [1, 2.5, None]}}),
    LoopEvent("x-vendor.custom:kind", {"nested": {"deep": [{"k": True}]}, "n": 10**18}),
    LoopEvent("reasoning_delta", {}),
    LoopEvent("content_delta", {"delta": "😀" * 100}),
]


def hub_for(tmp_path: Path, **overrides: Any) -> Hub:
    return build_hub(Settings(scripted_delay_s=0.0, workspace=str(tmp_path), **overrides))


async def ingest(hub: Hub, events: list[LoopEvent]) -> str:
    run_id = (await hub.start(StartRun(source="ingest"))).id
    for event in events:
        await hub.push(run_id, event)
    return run_id


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():  # the hub's state, which no event announces
            await anyio.lowlevel.checkpoint()


async def compacted(hub: Hub, run_id: str) -> Run:
    run = hub.run(run_id)
    await until(lambda: run.compact is not None and not run.hot and not run.ends)
    return run


async def read(hub: Hub, run_id: str, after: int = 0) -> list[list[Envelope]]:
    batches = []
    async with hub.subscribe(run_id, after=after) as sub:
        while not sub.done:
            batch = await sub.next_batch()
            if batch:
                batches.append(batch)
    return batches


def delta(n: int, size: int = 40) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": f"{n}:".ljust(size, "x")})


async def test_a_compacted_run_reads_the_same_envelopes_as_before(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        run_id = await ingest(hub, ODD * 20)
        before = hub.run(run_id).envelopes()
        await hub.push(run_id, DONE)
        before.append((await hub.history(run_id, after=len(before)))[0])
        run = await compacted(hub, run_id)
        assert run.compact is not None and len(run.compact) == len(before) == 101
        assert await hub.history(run_id) == before
        assert await hub.history(run_id, after=3, limit=4) == before[3:7]
        assert [e for batch in await read(hub, run_id) for e in batch] == before
        assert [e for batch in await read(hub, run_id, after=50) for e in batch] == before[50:]
        # Stored as encode_envelope makes each one: what native SSE writes.
        view = run.compact.batch(0, len(before), 1 << 30)
        assert envelope_frames(view) == envelope_frames(before)
        assert view.nbytes == sum(len(encode_envelope(e)) + 1 for e in before)


async def test_compaction_lets_the_objects_and_the_producer_go(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        run_id = await ingest(hub, [delta(i) for i in range(200)])
        run = hub.run(run_id)
        counted = run.retained
        assert (
            counted
            == run.ends[-1]
            == sum(
                len(encode_envelope(e).split(b'"data":', 1)[1]) - 1 + EVENT_OVERHEAD_BYTES
                for e in run.hot
            )
        )
        await hub.push(run_id, DONE)
        await compacted(hub, run_id)
        stored = sum(len(encode_envelope(e)) + 1 for e in await hub.history(run_id))
        # The JSON and four bytes of offset per event.
        assert run.retained == stored + 4 * 201 + 4 + 8
        assert hub.stats().retained_bytes == run.retained < counted / 3
        assert run.producer is None and not run.observers and not run.on_finish
        assert run.ended.is_set() and (await hub.get(run_id)).state == "finished"


async def test_batches_of_a_compacted_run_are_bounded_by_the_bytes_stored(
    tmp_path: Path,
) -> None:
    async with hub_for(tmp_path, max_batch_bytes=100 * 1024, max_batch=4) as hub:
        sizes = [30 * 1024] * 7 + [250 * 1024] + [10 * 1024] * 6
        run_id = await ingest(hub, [delta(i, n) for i, n in enumerate(sizes)] + [DONE])
        await compacted(hub, run_id)
        batches = await read(hub, run_id)
        # Three 30 KiB events fit 100 KiB, the big one goes alone, max_batch caps the rest.
        assert [len(b) for b in batches] == [3, 3, 1, 1, 4, 3]
        assert [e.seq for b in batches for e in b] == list(range(1, 16))


async def test_a_reader_mid_way_goes_on_while_the_run_is_compacted_chunk_by_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small chunks: the run is compacted in many steps, read between them.
    monkeypatch.setattr(budget_module, "COMPACT_CHUNK_BYTES", 8 * (40 + EVENT_OVERHEAD_BYTES))
    async with hub_for(tmp_path, max_batch=5, subscriber_max_lag=10_000) as hub:
        events = [delta(i) for i in range(300)] + [DONE]
        run_id = await ingest(hub, events)
        run = hub.run(run_id)
        expected = run.envelopes()
        seen: list[Envelope] = []
        states: set[tuple[bool, bool]] = set()
        async with hub.subscribe(run_id) as sub:
            seen += await sub.next_batch()
            while not sub.done:
                states.add((run.hot_base > 0, bool(run.hot)))
                seen += await sub.next_batch()
                await anyio.lowlevel.checkpoint()
        assert seen == expected
        assert (True, True) in states  # some reads were of a run compacted part way
        assert len(run.compact or []) == 301 and len((run.compact or CompactEvents()).chunks) > 10
        assert [e for b in await read(hub, run_id) for e in b] == expected


async def test_native_frames_of_every_chunk_match_the_envelopes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget_module, "COMPACT_CHUNK_BYTES", 3 * EVENT_OVERHEAD_BYTES)
    async with hub_for(tmp_path, max_batch=7) as hub:
        run_id = await ingest(hub, ODD * 6 + [DONE])
        run = await compacted(hub, run_id)
        framed = b""
        async with hub.subscribe(run_id) as sub:
            while not sub.done:
                batch = await sub.next_encoded()
                assert isinstance(batch, EncodedEnvelopes) and len(batch) <= 3
                framed += envelope_frames(batch)
        assert framed == envelope_frames(run.envelopes())


async def test_dropped_compacted_runs_still_answer_gone(tmp_path: Path) -> None:
    async with hub_for(tmp_path, max_retained_bytes=300 * 1024) as hub:
        runs = []
        for _ in range(8):
            runs.append(await ingest(hub, [delta(i, 20 * 1024) for i in range(5)] + [DONE]))
            await compacted(hub, runs[-1])
            assert hub.stats().retained_bytes <= 300 * 1024
        # Compacted, a run of 100 KiB counts 100 KiB: two fit, not one.
        kept = [r for r in runs if r in {i.id for i in await hub.list_runs()}]
        assert kept == runs[-len(kept) :] and len(kept) >= 2
        assert hub.stats().retained_bytes == sum(hub.run(r).retained for r in kept)
        with pytest.raises(RunGone, match="max_retained_bytes"):
            await hub.get(runs[0])
        with pytest.raises(RunGone):
            await hub.history(runs[0])
        assert len(await hub.history(runs[-1])) == 6


async def test_a_run_dropped_while_compacted_leaves_the_count_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget_module, "COMPACT_CHUNK_BYTES", 4 * (40 + EVENT_OVERHEAD_BYTES))
    async with hub_for(tmp_path) as hub:
        first = await ingest(hub, [delta(i) for i in range(400)] + [DONE])
        run = hub.run(first)
        await until(lambda: run.hot_base > 0)
        assert run.hot  # part way
        hub.table.drop(run, "max_runs (1)")
        second = await ingest(hub, [delta(1), DONE])
        await compacted(hub, second)
        assert run.compact is None and not run.hot and run.retained == 0
        with pytest.raises(RunGone):
            await hub.get(first)
        assert hub.stats().retained_bytes == hub.run(second).retained


async def test_sqlite_compacts_hot_finished_runs_once_committed(tmp_path: Path) -> None:
    db = f"sqlite:{tmp_path / 'journal.sqlite3'}"
    async with hub_for(tmp_path, journal=db) as hub:
        run_id = await ingest(hub, [*ODD, DONE])
        run = await compacted(hub, run_id)
        expected = await hub.journal.load_events(run_id)
        assert run.envelopes() == expected == await hub.history(run_id)
        assert [e for b in await read(hub, run_id) for e in b] == expected


async def test_runs_a_restart_ends_and_drops_at_once_are_never_compacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A previous process died with these runs open: the hub ends each as it starts and drops
    # it straight away, before its compactor runs; that must find nothing to do.
    from loopgate.gateway.hub.run import new_record
    from loopgate.gateway.journal import SqliteJournal

    path = tmp_path / "journal.sqlite3"
    journal = SqliteJournal(str(path))
    await journal.open()
    for n in range(3):
        record = new_record(f"run_{n}", f"run_{n}", "ingest", 1, {})
        journal.record_run(record)
        for seq in (1, 2):
            env = Envelope(record.id, seq, 1, "content_delta", {"delta": "x"})
            journal.record_event(env, b'{"delta":"x"}')
    await journal.flush()
    await journal.aclose()
    async with hub_for(tmp_path, journal=f"sqlite:{path}") as hub:
        for n in range(3):
            events = await hub.history(f"run_{n}")
            assert [e.seq for e in events] == [1, 2, 3]
            assert events[-1].data == {"status": "failed", "reason": "server_restarted"}
        run_id = await ingest(hub, [*ODD, DONE])
        # Compacted in turn: whatever the restart left for the compactor was done before it.
        assert (await compacted(hub, run_id)).envelopes() == await hub.history(run_id)
    assert "compacting run" not in caplog.text


async def test_a_run_of_big_events_is_left_as_objects(tmp_path: Path) -> None:
    # Its objects cost it under 1 % beyond its payloads: nothing to gain by encoding it again.
    async with hub_for(tmp_path) as hub:
        run_id = await ingest(hub, [delta(i, 100 * 1024) for i in range(3)])
        run = hub.run(run_id)
        own = run.ended
        await hub.push(run_id, DONE)
        await until(lambda: run.ended is not own)  # settled: its compactor's turn has come
        assert run.compact is None and len(run.hot) == 4
        assert run.producer is None and not run.observers and run.ended.is_set()
        assert [e.seq for e in await hub.history(run_id)] == [1, 2, 3, 4]
        assert [e.seq for b in await read(hub, run_id) for e in b] == [1, 2, 3, 4]
