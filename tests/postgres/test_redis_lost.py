"""PostgreSQL keeps what is acknowledged; Redis only carries what may be lost. kill -9 of a
redis-server that persists nothing (it comes back empty: every lease, claim and subscription
gone) mid-run loses no acknowledged event, clients are told to retry what needs Redis, and the
instances go on once it is back."""

from __future__ import annotations

from functools import partial

import anyio
import psycopg
import pytest
import redis

from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun, Unavailable
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess
from tests.waiting import until

pytestmark = pytest.mark.anyio


def delta(i: int) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": f"d{i}"})


async def committed_seqs(postgres_url: str, run_id: str) -> list[int]:
    """What PostgreSQL holds of the run, read with a connection of its own (a journal opened
    without the bus would take the running runs for its own)."""
    base, schema = postgres_url.split("?schema=")
    async with await psycopg.AsyncConnection.connect(base) as conn:
        cur = await conn.execute(
            f'SELECT seq FROM "{schema}".events WHERE run_id = %s ORDER BY seq', (run_id,)
        )
        return [int(row[0]) for row in await cur.fetchall()]


async def test_kill_9_of_redis_loses_no_acknowledged_event(
    postgres_url: str, volatile_redis: RedisProcess
) -> None:
    settings = Settings(journal=postgres_url, bus=volatile_redis.url, scripted_delay_s=0.0)
    async with build_hub(settings) as a, build_hub(settings) as b:
        run_id = (await a.start(StartRun(source="ingest"))).id
        async with b.subscribe(run_id) as watcher:
            acknowledged: list[int] = []
            for i in range(1, 21):
                acknowledged.append((await a.push(run_id, delta(i))).seq)
            volatile_redis.kill()
            # Redis is gone: pushes to the owner are still committed, and acknowledged.
            with anyio.fail_after(20):
                for i in range(21, 41):
                    acknowledged.append((await a.push(run_id, delta(i))).seq)
            assert acknowledged == list(range(1, 41))
            assert await committed_seqs(postgres_url, run_id) == acknowledged
            # What needs Redis is answered at once: retry shortly.
            with anyio.fail_after(20), pytest.raises(Unavailable) as away:
                await a.start(StartRun(source="ingest", run_id="needs-a-claim"))
            problem = problem_for(away.value)
            assert problem is not None and problem.status == 503
            # The follower on B reads PostgreSQL meanwhile: it misses nothing.
            with anyio.fail_after(20):
                seen: list[int] = []
                while len(seen) < 40:
                    seen += [e.seq for e in await watcher.next_batch()]
            assert seen == list(range(1, 41))
            volatile_redis.start()  # empty: every lease and subscription is gone
            with anyio.fail_after(30):
                for i in range(41, 46):
                    await a.push(run_id, delta(i))
                while len(seen) < 45:
                    seen += [e.seq for e in await watcher.next_batch()]
                # Commands reach the owner again once its channel is subscribed anew.
                await until(partial(b.cancel, run_id), lambda answer: answer.accepted)
                await a.run(run_id).ended.wait()
                await a.wait_committed(run_id, 46)
                while len(seen) < 46:  # and B's client sees the end
                    seen += [e.seq for e in await watcher.next_batch()]
        assert seen == list(range(1, 47))
        # No instance ended the other's run for a lease the restart lost.
        history = await b.history(run_id)
        assert [e.seq for e in history] == list(range(1, 47))
        assert history[-1].data["status"] == "cancelled"
        assert [e.kind for e in history].count("completion") == 1
    assert await committed_seqs(postgres_url, run_id) == list(range(1, 47))


async def test_redis_keeps_nothing_of_finished_runs_or_gone_instances(
    postgres_url: str, volatile_redis: RedisProcess
) -> None:
    """What the bus holds is what live instances hold: finished runs leave no key behind,
    and an instance gone for good leaves the directory of instances."""
    prefix = "gone"
    bus = f"{volatile_redis.url}?prefix={prefix}&lease=0.3"
    settings = Settings(journal=postgres_url, bus=bus, scripted_delay_s=0.0)
    async with build_hub(settings) as gone:
        for _ in range(3):
            run_id = (await gone.start(StartRun(source="ingest"))).id
            await gone.push(run_id, LoopEvent("completion", {"status": "completed"}))
    client = redis.Redis.from_url(volatile_redis.url)

    def keys() -> list[bytes]:
        return sorted(client.scan_iter(match=f"{prefix}:*"))

    async with build_hub(settings) as survivor:
        assert survivor.journal.cluster is not None
        me = survivor.journal.cluster.link.instance.encode()

        # Directories of the live instances: the instances, and those that take queued runs.
        takers = f"{prefix}:queue-takers"

        async def directories() -> tuple[list[bytes], set[bytes]]:
            instances = await anyio.to_thread.run_sync(client.zrange, f"{prefix}:instances", 0, -1)
            return list(instances), set(await anyio.to_thread.run_sync(client.smembers, takers))

        with anyio.fail_after(20):
            await until(directories, lambda found: found == ([me], {me}))
        left = [k for k in keys() if me not in k]
        assert left == [f"{prefix}:instances".encode(), takers.encode()], left
