"""The run registry across instances: a client-chosen id started on two instances at once is
started once, listing shows another instance's running run as far as it has got, and the
reapers look only at the runs of instances that are gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import redis.asyncio as aioredis

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import RunExists, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.journal.redis_streams import RedisJournal
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def hub(url: str) -> AsyncIterator[Hub]:
    async with build_hub(Settings(journal=url, scripted_delay_s=0.0)) as h:
        yield h


async def start(h: Hub, run_id: str, outcomes: dict[str, str], name: str) -> None:
    try:
        await h.start(StartRun(source="ingest", run_id=run_id))
        outcomes[name] = "started"
    except RunExists:
        outcomes[name] = "exists"


async def test_one_id_started_on_two_instances_at_once_is_started_once(redis_url: str) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b:
        for n in range(10):
            run_id = f"chosen-{n}"
            outcomes: dict[str, str] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(start, a, run_id, outcomes, "a")
                tg.start_soon(start, b, run_id, outcomes, "b")
            assert sorted(outcomes.values()) == ["exists", "started"], run_id
            owner = a if outcomes["a"] == "started" else b
            assert (await owner.get(run_id)).state == "running"


async def test_a_listed_running_run_of_another_instance_has_its_last_seq(redis_url: str) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b:
        run_id = (await a.start(StartRun(source="ingest"))).id
        for i in range(3):
            await a.push(run_id, LoopEvent("content_delta", {"delta": str(i)}))
        (listed,) = [r for r in await b.list_runs() if r.id == run_id]
        assert listed.state == "running" and listed.last_seq == 3


async def command_calls(url: str, *commands: str) -> int:
    client = aioredis.Redis.from_url(url.split("?")[0])
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in commands)


async def test_a_sweep_reads_no_run_while_every_instance_lives(redis_url: str) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b:
        for _ in range(30):
            await a.start(StartRun(source="ingest"))
        journal = b.journal
        assert isinstance(journal, RedisJournal)
        before = await command_calls(redis_url, "sscan", "mget")
        assert await journal.cluster.end_orphans() == []
        # One look at the directory and the leases; not one run's keys.
        assert await command_calls(redis_url, "sscan", "mget") == before


async def test_a_lost_instance_leaves_the_directory_once_its_runs_are_ended(
    redis_url: str,
) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b:
        ids = {(await a.start(StartRun(source="ingest"))).id for _ in range(3)}
        lost, survivor = a.journal, b.journal
        assert isinstance(lost, RedisJournal) and isinstance(survivor, RedisJournal)
        client = aioredis.Redis.from_url(redis_url.split("?")[0])
        try:
            await client.delete(lost.link.lease_key(lost.link.instance))  # as if A had died
            assert set(await survivor.cluster.end_orphans()) == ids
            directory = await client.zrange(survivor.link.key("instances"), 0, -1)
        finally:
            await client.aclose()
        assert {m.decode() for m in directory} == {survivor.link.instance}
        for run_id in ids:
            assert (await b.get(run_id)).status == "failed"
