"""Exactly-once on the stream: two instances racing to append to one run never double or
skip a seq (the append script refuses a batch that does not follow the last seq), and two
survivors racing to end an orphaned run end it once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import msgspec
import pytest

from loopgate.contracts.envelope import Envelope
from loopgate.gateway.hub.run import new_record
from loopgate.gateway.journal.redis_streams import RedisJournal

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def journal(url: str, lease: str = "10") -> AsyncIterator[RedisJournal]:
    j = RedisJournal(f"{url}&lease={lease}")
    await j.open()
    try:
        yield j
    finally:
        await j.aclose()


def event(run_id: str, seq: int, who: str) -> tuple[Envelope, bytes]:
    data = {"delta": f"{who}{seq}"}
    return Envelope(run_id, seq, seq, "content_delta", data), msgspec.json.encode(data)


async def test_the_same_seqs_from_two_instances_are_appended_once(redis_url: str) -> None:
    async with journal(redis_url) as a, journal(redis_url) as b:
        lost: dict[str, list[str]] = {"a": [], "b": []}
        a.cluster.on_lost = lost["a"].append
        b.cluster.on_lost = lost["b"].append
        a.record_run(new_record("r", "r", "ingest", 1, {}))
        await a.flush()
        for seq in range(1, 51):
            a.record_event(*event("r", seq, "a"))
            b.record_event(*event("r", seq, "b"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.flush)
            tg.start_soon(b.flush)
        events = await a.load_events("r")
        assert [e.seq for e in events] == list(range(1, 51))
        # One batch won whole, the other was refused whole (and its instance told).
        winner = events[0].data["delta"][0]
        assert {e.data["delta"] for e in events} == {f"{winner}{s}" for s in range(1, 51)}
        loser = "b" if winner == "a" else "a"
        assert lost[loser] == ["r"] and lost[winner] == []


async def test_a_stale_append_after_another_instance_appended_is_refused(redis_url: str) -> None:
    async with journal(redis_url) as a, journal(redis_url) as b:
        refused: list[str] = []
        a.cluster.on_lost = refused.append
        a.record_run(new_record("r", "r", "ingest", 1, {}))
        for seq in range(1, 11):
            a.record_event(*event("r", seq, "a"))
        await a.flush()
        for seq in range(11, 21):
            b.record_event(*event("r", seq, "b"))
        await b.flush()
        for seq in range(11, 16):  # A has not seen B's events: its seqs are taken
            a.record_event(*event("r", seq, "a"))
        await a.flush()
        for seq in range(22, 25):  # …and a gap is refused as well
            b.record_event(*event("r", seq, "b"))
        await b.flush()
        events = await b.load_events("r")
        assert [e.seq for e in events] == list(range(1, 21))
        assert [e.data["delta"][0] for e in events] == ["a"] * 10 + ["b"] * 10
        assert refused == ["r"]


async def test_racing_appenders_leave_a_gapless_stream(redis_url: str) -> None:
    """Each appender reads the last seq, appends the next one and commits, over and over:
    every append that succeeded is in the stream once, and the seqs have no gap."""
    async with journal(redis_url) as a, journal(redis_url) as b:
        a.record_run(new_record("r", "r", "ingest", 1, {}))
        await a.flush()
        won: dict[str, list[int]] = {"a": [], "b": []}

        async def append(j: RedisJournal, who: str) -> None:
            refused: list[str] = []
            j.cluster.on_lost = refused.append
            for _ in range(100):
                last = await j.load_events("r", after=0)
                seq = last[-1].seq + 1 if last else 1
                j.record_event(*event("r", seq, who))
                await j.flush()
                if refused:
                    refused.clear()
                else:
                    won[who].append(seq)

        async with anyio.create_task_group() as tg:
            tg.start_soon(append, a, "a")
            tg.start_soon(append, b, "b")
        events = await a.load_events("r")
        total = len(won["a"]) + len(won["b"])
        assert [e.seq for e in events] == list(range(1, total + 1))
        assert sorted(won["a"] + won["b"]) == list(range(1, total + 1))
        for e in events:
            assert e.seq in won[e.data["delta"][0]]


async def test_two_survivors_end_an_orphaned_run_once(redis_url: str) -> None:
    async with journal(redis_url, lease="0.2") as owner:
        owner.record_run(new_record("r", "r", "ingest", 1, {}))
        for seq in range(1, 4):
            owner.record_event(*event("r", seq, "o"))
        await owner.flush()
    # The owner is gone (closed: its lease deleted, as an expired one would be).
    async with journal(redis_url) as s1, journal(redis_url) as s2:
        ended: list[list[str]] = []

        async def reap(j: RedisJournal) -> None:
            ended.append(await j.cluster.end_orphans())

        async with anyio.create_task_group() as tg:
            tg.start_soon(reap, s1)
            tg.start_soon(reap, s2)
        assert sorted(ended, key=len) == [[], ["r"]]
        events = await s1.load_events("r")
        assert [e.seq for e in events] == [1, 2, 3, 4]
        assert events[-1].data == {"status": "failed", "reason": "owner_lost"}
        record = await s2.load_run("r")
        assert record is not None and record.state == "finished" and record.last_seq == 4
        assert await s1.cluster.end_orphans() == []


async def test_a_refused_batch_is_told_apart_from_the_runs_committed_with_it(
    redis_url: str,
) -> None:
    """One commit carries several runs, each followed by its registry updates: each run's
    outcome is read at its own place among the replies."""
    async with journal(redis_url) as a, journal(redis_url) as b:
        a.record_run(new_record("r", "r", "ingest", 1, {}))
        a.record_event(*event("r", 1, "a"))
        await a.flush()
        lost: list[str] = []
        committed: list[dict[str, int]] = []
        b.cluster.on_lost = lost.append
        b.on_commit = committed.append
        # B starts a run of its own, and sends a stale copy of A's seq 1, in one commit.
        b.record_run(new_record("x", "x", "ingest", 2, {}))
        b.record_event(*event("x", 1, "b"))
        b.record_event(*event("r", 1, "b"))
        with anyio.fail_after(10):
            await b.flush()
        assert lost == ["r"]
        assert committed == [{"x": 1}]
        assert [e.data for e in await b.load_events("r")] == [{"delta": "a1"}]
