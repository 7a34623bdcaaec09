"""Redis goes away and comes back (a restart with its append-only file): commits wait and are
retried, nothing acknowledged is lost or doubled, and every instance goes on — its commit
writer, command channel, follower and lease renewal all reconnect."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun, Unavailable
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess

pytestmark = pytest.mark.anyio


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server that keeps every write (appendfsync always) in ``tmp_path``."""
    with RedisProcess(
        "--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always", "--save", ""
    ) as server:
        yield server


def delta(i: int) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": f"d{i}"})


async def test_a_redis_restart_loses_and_doubles_nothing(durable_redis: RedisProcess) -> None:
    settings = Settings(journal=durable_redis.url, scripted_delay_s=0.0)
    async with build_hub(settings) as a, build_hub(settings) as b:
        run_id = (await a.start(StartRun(source="ingest"))).id
        async with b.subscribe(run_id) as watcher:
            for i in range(1, 21):
                await a.push_nowait(run_id, delta(i))
            await a.wait_committed(run_id, 20)
            durable_redis.kill()
            for i in range(21, 41):
                await a.push_nowait(run_id, delta(i))
            durable_redis.start()
            with anyio.fail_after(30):
                await a.wait_committed(run_id, 40)
                seen: list[int] = []
                while len(seen) < 40:
                    seen += [e.seq for e in await watcher.next_batch()]
            assert seen == list(range(1, 41))
        # Both instances go on: a command sent from B right away reaches the owner A (whose
        # command channel is subscribing again meanwhile), and its end is B's to read.
        with anyio.fail_after(30):
            assert (await b.cancel(run_id)).accepted
            await a.run(run_id).ended.wait()
            await a.wait_committed(run_id, 41)
        history = await b.history(run_id)
        assert [e.seq for e in history] == list(range(1, 42))
        assert [e.data["delta"] for e in history[:40]] == [f"d{i}" for i in range(1, 41)]
        assert history[-1].kind == "completion" and history[-1].data["status"] == "cancelled"


async def test_a_request_while_redis_is_away_is_told_to_retry(durable_redis: RedisProcess) -> None:
    settings = Settings(journal=durable_redis.url, scripted_delay_s=0.0)
    async with build_hub(settings) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        durable_redis.kill()
        # What is held here is still served; what must be read from Redis is Unavailable.
        assert (await hub.get(run_id)).state == "running"
        with pytest.raises(Unavailable) as away:
            await hub.get("run_elsewhere")
        with pytest.raises(Unavailable):
            await hub.list_runs()
        problem = problem_for(away.value)
        assert problem is not None and problem.status == 503
        assert problem.headers == {"retry-after": "1"} and "Redis" in problem.detail
        durable_redis.start()  # listening: the next request reconnects
        with anyio.fail_after(30):
            assert [r.id for r in await hub.list_runs()] == [run_id]
