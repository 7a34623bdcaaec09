"""An instance's Redis connections are a bounded pool that requests wait for (issue 33).

redis-py's asyncio pool (100 connections unless ``max_connections`` says otherwise) refuses a
command at once when all its connections are in use ("Too many connections"): a burst of
requests past the pool's size was answered 503 by the instance, with Redis idle. Now a
command waits for a connection to come free, for ``pool_wait`` seconds at most (the journal
URL's parameter, 5 by default), and only then is 503.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import anyio
import httpx

from tests.fakes.redis_server import RedisProcess
from tests.redis.test_instances import instances

BURST = 60
details: set[str] = set()


async def burst(
    base: str, path: str, count: int = BURST, timeout_s: float = 60
) -> Counter[int | str]:
    """``count`` GETs of ``path`` at once: how many got each status ("timeout": none)."""
    statuses: Counter[int | str] = Counter()
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s) as client:

        async def get() -> None:
            try:
                answer = await client.get(path)
            except httpx.TimeoutException:
                statuses["timeout"] += 1
                return
            statuses[answer.status_code] += 1
            if answer.status_code == 503:
                details.add(answer.json()["detail"])

        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(get)
    return statuses


def test_a_burst_past_the_pool_waits_for_connections_instead_of_503(redis_url: str) -> None:
    with instances(f"{redis_url}&max_connections=3", 1) as procs:
        ((base, _),) = procs
        httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).raise_for_status()
        assert anyio.run(burst, base, "/v1/runs") == {200: BURST}


def test_a_request_that_gets_no_connection_in_time_is_503_at_once() -> None:
    with (
        RedisProcess("--save", "", "--appendonly", "no") as server,
        instances(f"{server.url}?max_connections=3&pool_wait=0.5", 1) as procs,
    ):
        ((base, _),) = procs
        httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).raise_for_status()
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)  # the one connection's command waits on Redis
        try:
            # The request on the stalled Redis is left to its client's timeout.
            statuses = anyio.run(burst, base, "/v1/runs", 4, 5.0)
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        # Three connections: the command listener holds one (a subscription), the shared run
        # queue's take another (a blocking read), and the requests the third, which waits on
        # the stalled Redis: the rest wait half a second, then 503.
        assert statuses[503] >= 3, statuses
        assert details == {
            "this instance's connections to the shared journal (Redis) are all busy; retry shortly"
        }
        assert httpx.get(f"{base}/v1/runs").status_code == 200
