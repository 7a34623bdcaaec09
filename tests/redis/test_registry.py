"""The run registry across instances: a client-chosen id started on two instances at once is
started once, and listing shows another instance's running run as far as it has got."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import RunExists, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
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
