"""PostgreSQL stalled (every process of it stopped: connections stay open, nothing answers)
or killed: every wait is bounded by the journal URL's timeouts, clients are answered 503 with
a message that names PostgreSQL, /readyz says why, and once it answers again every event that
was waiting is committed and no run is left running."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import anyio
import pytest

from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun, Unavailable
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub.hub import Hub
from loopgate.gateway.settings import Settings
from tests.fakes.postgres_server import PostgresProcess
from tests.postgres.conftest import with_schema
from tests.waiting import until

pytestmark = pytest.mark.anyio

TIMEOUTS = "statement_timeout=1&pool_timeout=1&connect_timeout=1"


@pytest.fixture
def own_postgres() -> Iterator[PostgresProcess]:
    with PostgresProcess() as server:
        yield server


def delta(i: int) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": f"d{i}"})


async def readiness(hub: Hub) -> list[str]:
    return hub.readiness()


async def until_unready(hub: Hub, words: str) -> list[str]:
    with anyio.fail_after(20):
        return await until(partial(readiness, hub), lambda r: any(words in x for x in r))


@pytest.mark.parametrize("fault", ["stall", "kill"])
async def test_postgres_away_is_a_bounded_wait_and_a_clear_answer(
    own_postgres: PostgresProcess, redis_url: str, fault: str
) -> None:
    url = f"{with_schema(own_postgres.url)}&{TIMEOUTS}"
    settings = Settings(journal=url, bus=redis_url, scripted_delay_s=0.0)
    async with build_hub(settings) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        for i in range(1, 4):
            await hub.push(run_id, delta(i))
        if fault == "stall":
            own_postgres.stall()
        else:
            own_postgres.kill()
        # Queued; its commit waits for PostgreSQL, a bounded while each attempt.
        await hub.push_nowait(run_id, delta(4))
        reasons = await until_unready(hub, "PostgreSQL")
        assert any(r.startswith("journal: PostgreSQL does not answer") for r in reasons), reasons
        # A new run or push is answered at once: nothing it adds could be committed.
        with anyio.fail_after(2), pytest.raises(Unavailable) as refused:
            await hub.start(StartRun(source="ingest"))
        problem = problem_for(refused.value)
        assert problem is not None and problem.status == 503
        assert "PostgreSQL does not answer" in problem.detail
        with anyio.fail_after(2), pytest.raises(Unavailable):
            await hub.push(run_id, delta(5))
        # A read PostgreSQL must answer waits no longer than its timeouts.
        with anyio.fail_after(10), pytest.raises(Unavailable) as away:
            await hub.get("run_held_nowhere")
        assert "PostgreSQL" in str(away.value)
        if fault == "stall":
            own_postgres.resume()
        else:
            own_postgres.start()
        with anyio.fail_after(30):
            await hub.wait_committed(run_id, 4)
            await until(partial(readiness, hub), lambda reasons: not reasons)
            await hub.push(run_id, LoopEvent("completion", {"status": "completed"}))
        history = await hub.history(run_id)
        assert [e.seq for e in history] == [1, 2, 3, 4, 5]
        assert (await hub.get(run_id)).state == "finished"
        assert [r.id for r in await hub.list_runs() if r.state == "running"] == []
