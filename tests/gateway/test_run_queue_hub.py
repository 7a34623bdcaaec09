"""The run queue in-process, with the SQLite journal: a shutdown ends queued runs (cancelled,
without having run) along with the running ones, and the journal keeps them as any run, so a
restart has nothing left waiting."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from loopgate.contracts.ports import StartRun
from tests.gateway.test_hub import hub_for

pytestmark = pytest.mark.anyio


async def test_a_shutdown_ends_queued_runs(tmp_path: Path) -> None:
    settings = {"journal": f"sqlite:///{tmp_path}/runs.db", "max_active_runs": 1}
    async with hub_for(tmp_path, max_queued_runs=3, **settings) as hub:
        going = await hub.start(StartRun(input="slow tool"))
        queued = [await hub.start(StartRun(input=f"plain {i}")) for i in range(2)]
        assert going.state == "running"
        assert [(q.state, q.queue_position) for q in queued] == [("queued", 1), ("queued", 2)]
        with anyio.fail_after(10):
            await hub.drain()
        for info in queued:
            run = await hub.get(info.id)
            events = await hub.history(info.id)
            assert (run.state, run.status) == ("finished", "cancelled")
            assert [e.kind for e in events] == ["completion"]  # it never ran
    async with hub_for(tmp_path, **settings) as again:
        runs = await again.list_runs()
        assert {r.id: r.status for r in runs} == {
            going.id: "cancelled",
            queued[0].id: "cancelled",
            queued[1].id: "cancelled",
        }
