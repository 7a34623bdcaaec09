"""The shared run queue while Redis is away (docs/scale.md: roles and the shared run queue): a
start the queue would take is 503, as any start; a worker takes nothing meanwhile and goes on
taking once Redis is back. In-process hubs (an api one, a worker) on a real redis-server that
is killed and started again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.ports import RunInfo, StartRun, Unavailable
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess
from tests.waiting import until

pytestmark = pytest.mark.anyio


async def test_redis_away_a_start_is_503_and_workers_take_runs_again_once_it_is_back(
    tmp_path: Path,
) -> None:
    with RedisProcess("--dir", str(tmp_path), "--appendonly", "yes", "--save", "") as server:
        common = {"journal": server.url, "scripted_delay_s": 0.0}
        async with (
            build_hub(Settings(role="api", **common)) as api,
            build_hub(Settings(role="worker", **common)) as worker,
        ):
            await away_and_back(api, worker, server)


async def away_and_back(
    api: Hub, worker: Hub, server: RedisProcess, while_away: Callable[[], None] = lambda: None
) -> None:
    """A run queued on ``api`` runs on ``worker``; with ``server`` killed a start is 503 (then
    ``while_away`` checks what it left); once it is back, runs are queued and run again."""

    async def ran(run_id: str) -> RunInfo:
        with anyio.fail_after(30):
            return await until(lambda: api.get(run_id), lambda i: i.state == "finished")

    before = await api.start(StartRun(input="hello"))
    assert before.state == "queued"
    assert (await ran(before.id)).status == "completed"

    server.kill()
    with pytest.raises(Unavailable) as away:
        await api.start(StartRun(input="hello"))
    problem = problem_for(away.value)
    assert problem is not None and problem.status == 503 and "Redis" in problem.detail
    while_away()

    server.start()
    with anyio.fail_after(30):
        after = await until(lambda: _start(api), lambda i: i is not None)
    assert after is not None and after.state == "queued"
    assert (await ran(after.id)).status == "completed"
    assert worker.run(after.id).record.status == "completed"  # the worker ran it


async def _start(api: Hub) -> RunInfo | None:
    """A start, or None while Redis is still coming back."""
    try:
        return await api.start(StartRun(input="hello"))
    except Unavailable:
        return None


async def test_a_run_taken_but_not_begun_goes_back_to_the_queue(redis_url: str) -> None:
    """A worker whose read of the run it took failed (Redis away between the take and the
    begin) held it in its taken list for as long as it lived: the run stayed queued forever.
    Between starts a worker puts back what it took and did not begin."""
    async with build_hub(Settings(journal=redis_url, role="api", scripted_delay_s=0.0)) as api:
        queued = await api.start(StartRun(input="hello"))
        assert queued.state == "queued"
        assert api.shared is not None
        store = api.shared.store
        # Taken as a worker takes it, then nothing: as if the next read had failed.
        assert await store.take(1.0) == queued.id
        assert await store.position(queued.id) is None
        assert await store.requeue_own() == [queued.id]
        assert await store.position(queued.id) == 1
        assert (await api.get(queued.id)).state == "queued"
        assert await store.requeue_own() == []
