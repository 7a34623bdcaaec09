"""The run queue of a PostgreSQL journal while its Redis bus is away (docs/scale.md: roles and
the shared run queue): a start the queue would take is 503, and leaves no ``queued`` row behind
(nothing would ever take it: it ran for a client told it was refused); a worker takes runs
again once Redis is back. In-process hubs (an api one, a worker) on a real PostgreSQL and a real
redis-server killed and started again; and a role without a shared queue refused at start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess
from tests.gateway.harness import REPO
from tests.postgres.test_journal import count
from tests.redis.test_shared_queue_outage import away_and_back

pytestmark = pytest.mark.anyio


async def test_redis_away_a_start_is_503_leaves_no_row_and_workers_take_runs_once_it_is_back(
    postgres_url: str, volatile_redis: RedisProcess
) -> None:
    common = {"journal": postgres_url, "bus": volatile_redis.url, "scripted_delay_s": 0.0}
    async with (
        build_hub(Settings(role="api", **common)) as api,
        build_hub(Settings(role="worker", **common)) as worker,
    ):

        def no_row_left() -> None:
            assert count(postgres_url, "SELECT count(*) FROM runs WHERE state = 'queued'") == 0

        await away_and_back(api, worker, volatile_redis, no_row_left)


def test_a_role_on_postgresql_without_a_bus_is_refused_at_start(postgres_url: str) -> None:
    serve = [sys.executable, "-m", "loopgate", "serve", "--role", "worker"]
    done = subprocess.run(
        [*serve, "--journal", postgres_url], cwd=REPO, capture_output=True, timeout=60
    )
    assert done.returncode == 2
    assert b"role worker needs a journal the instances share" in done.stderr
    assert b"without --bus" in done.stderr and b"Traceback" not in done.stderr
