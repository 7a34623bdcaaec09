"""Two hubs in one process on one Redis: what an instance holds of another's runs is bounded
by its own settings, and an owner whose run was ended by a survivor lets its stale copy go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio as aioredis

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import CutOff, RunFinished, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.journal.redis_streams import RedisJournal
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def hub(url: str, **settings: Any) -> AsyncIterator[Hub]:
    async with build_hub(Settings(journal=url, scripted_delay_s=0.0, **settings)) as h:
        yield h


def delta(i: int, size: int = 1000) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": f"{i:04d}" + "x" * size})


async def test_following_many_remote_runs_stays_within_the_byte_bounds(redis_url: str) -> None:
    bound = 200_000
    async with hub(redis_url) as a, hub(redis_url, max_retained_bytes=bound) as b:
        runs = []
        for _ in range(30):  # ≈ 60 KB each as a hub counts them: ≈ 1.8 MB in all
            info = await a.start(StartRun(source="ingest"))
            for i in range(40):
                await a.push_nowait(info.id, delta(i))
            await a.wait_committed(info.id, 40)
            runs.append(info.id)
        for run_id in runs:
            async with b.subscribe(run_id) as sub:
                seen = []
                while len(seen) < 40:
                    seen += await sub.next_batch()
            assert [e.seq for e in seen] == list(range(1, 41))
            assert b.stats().retained_bytes <= bound
        # Still running, on A; B followed each while it watched and holds what fits.
        assert all(not a.run(r).finished for r in runs)
        # …and follows live what A appends to one it watches.
        async with b.subscribe(runs[0], after=40) as sub:
            await a.push(runs[0], LoopEvent("completion", {"status": "completed"}))
            (done,) = await sub.next_batch()
            assert done.seq == 41 and done.data == {"status": "completed"}


async def test_an_owner_whose_run_was_ended_elsewhere_refuses_further_pushes(
    redis_url: str,
) -> None:
    async with hub(redis_url) as a:
        info = await a.start(StartRun(source="ingest"))
        await a.push(info.id, delta(1, 10))
        journal = a.journal
        assert isinstance(journal, RedisJournal)
        async with a.subscribe(info.id) as sub:
            assert [e.seq for e in await sub.next_batch()] == [1]
            # A's lease lapses (a long pause) and a survivor ends the run.
            client = aioredis.Redis.from_url(journal.link.url)
            await client.delete(journal.link.lease_key(journal.link.instance))
            await client.aclose()
            survivor = RedisJournal(redis_url)
            await survivor.open()
            assert await survivor.cluster.end_orphans() == [info.id]
            await survivor.aclose()
            with pytest.raises(RunFinished):
                await a.push(info.id, delta(2, 10))
            # A's reader is cut off with its cursor, and resumes from Redis: the real end.
            with pytest.raises(CutOff) as cut:
                await sub.next_batch()
        assert cut.value.cursor == 1
        history = await a.history(info.id)
        assert [e.seq for e in history] == [1, 2]
        assert history[-1].data == {"status": "failed", "reason": "owner_lost"}
        assert (await a.get(info.id)).status == "failed"
