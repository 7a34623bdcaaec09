"""JSON-RPC responses bounded in total bytes: a batch's items past the bound are not run (each
gets -32009), a page of run.events ends at the bound, and the server's memory stays small.

The issue's case: a 13 KB ``POST /rpc`` batch of 100 × ``run.events {limit: 1000}`` built a
977 MiB response (RSS 1.0 → 3.9 GB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopgate.adapters.jsonrpc.dispatch import Dispatcher
from loopgate.adapters.jsonrpc.limits import RpcLimits
from loopgate.contracts.envelope import Envelope, LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.gateway.harness import gateway_process
from tests.jsonrpc.jsonrpc_support import RpcProcess

pytestmark = pytest.mark.anyio

EVENT_BYTES = 4_000


class CountingService:
    """The hub, counting the pages it is asked for (the work a batch item costs)."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.pages = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.hub, name)

    async def history(self, run_id: str, **kwargs: Any) -> list[Envelope]:
        self.pages += 1
        return await self.hub.history(run_id, **kwargs)  # type: ignore[no-any-return]


def events_call(rid: int, run_id: str, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "run.events",
        "params": {"runId": run_id, "limit": 1000, **params},
    }


async def ingest_run(hub: Any, count: int) -> str:
    info = await hub.start(StartRun(source="ingest"))
    for i in range(count):
        delta = f"{i:06d}" + "x" * EVENT_BYTES
        await hub.push(info.id, LoopEvent("content_delta", {"delta": delta}))
    await hub.push(info.id, LoopEvent("completion", {"status": "completed"}))
    return str(info.id)


async def test_items_past_the_bound_are_answered_without_being_run() -> None:
    limit = 200_000
    async with build_hub(Settings(scripted_delay_s=0.0)) as hub:
        run_id = await ingest_run(hub, 300)  # ~1.2 MB of events: six times the bound
        service = CountingService(hub)
        dispatcher = Dispatcher(service, RpcLimits(max_batch_response_bytes=limit))  # type: ignore[arg-type]
        batch = [events_call(i, run_id) for i in range(98)]  # + 2 more: max_batch is 100
        batch.insert(50, {"jsonrpc": "2.0", "method": "run.events", "params": {"runId": run_id}})
        batch.append({"jsonrpc": "2.0", "id": "bad"})  # invalid: still its own -32600
        raw = await dispatcher.handle(json.dumps(batch).encode())
    assert raw is not None
    replies = json.loads(raw)
    assert len(raw) < limit + 2 * (EVENT_BYTES + 200) + 100 * 400
    answered = [r for r in replies if "result" in r]
    refused = [r for r in replies if r.get("error", {}).get("code") == -32009]
    assert answered and refused and len(answered) + len(refused) == 98
    assert [r["id"] for r in replies[:-1]] == list(range(98))  # in order, each its own id
    assert replies[-1]["error"]["code"] == -32600
    error = refused[0]["error"]
    assert error["message"] == "Response limit reached"
    assert error["data"]["limit"] == limit and "not run" in error["data"]["detail"]
    # Not computed and thrown away: the refused items never reached the hub. The notification
    # in the middle was run (it adds nothing to the response).
    assert service.pages == len(answered) + 1
    # The answered pages are partial pages: the client goes on from their cursors.
    first = answered[0]["result"]
    assert not first["done"] and first["cursor"] == first["events"][-1]["seq"] < 300


async def test_a_single_page_of_events_is_bounded_too() -> None:
    async with build_hub(Settings(scripted_delay_s=0.0)) as hub:
        run_id = await ingest_run(hub, 100)
        dispatcher = Dispatcher(hub, RpcLimits(max_batch_response_bytes=50_000))
        pages, after = [], 0
        while True:
            raw = await dispatcher.handle(json.dumps(events_call(1, run_id, after=after)))
            assert raw is not None and len(raw) < 50_000 + EVENT_BYTES + 500
            page = json.loads(raw)["result"]
            pages.append(page)
            after = page["cursor"]
            if page["done"]:
                break
    seqs = [e["seq"] for page in pages for e in page["events"]]
    assert seqs == list(range(1, 102)) and len(pages) > 5


def test_stdio_batches_are_bounded(tmp_path: Path) -> None:
    with RpcProcess(env={"LOOPGATE_MAX_BATCH_RESPONSE_BYTES": "3000"}) as rpc:
        reply, _ = rpc.call("run.start", {"replay": "parallel-tools"})
        run_id = reply["result"]["runId"]
        rpc.send([events_call(i, run_id) for i in range(1, 6)])
        while not isinstance(replies := rpc.recv(), list):
            pass  # the run's own notifications, if any
        codes = [r.get("error", {}).get("code") for r in replies]
        assert codes[0] is None and codes[-1] == -32009
        assert rpc.finish() == 0


def vm(pid: int, key: str) -> int:
    """VmRSS / VmHWM of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} for {pid}")


def test_the_issues_batch_keeps_the_servers_memory_small() -> None:
    """100 × run.events {limit: 1000} of a 4 MB run: unbounded, a 400 MB response."""
    with gateway_process(env={"LOOPGATE_MAX_BATCH_RESPONSE_BYTES": str(2 << 20)}) as (base, proc):
        with httpx.Client(base_url=base, timeout=60) as client:
            run_id = client.post("/v1/runs", json={"source": "ingest"}).json()["id"]
            line = json.dumps({"kind": "content_delta", "data": {"delta": "x" * EVENT_BYTES}})
            body = "\n".join([line] * 1000) + "\n" + json.dumps({"kind": "completion"})
            pushed = client.post(f"/v1/runs/{run_id}/events", content=body)
            assert pushed.status_code == 200, pushed.text
            before = vm(proc.pid, "VmHWM")
            batch = json.dumps([events_call(i, run_id) for i in range(100)])
            assert len(batch) < 13_000
            response = client.post(
                "/rpc", content=batch, headers={"content-type": "application/json"}
            )
            grown = vm(proc.pid, "VmHWM") - before
        replies = response.json()
    assert response.status_code == 200 and len(response.content) < 3 << 20
    assert sum("result" in r for r in replies) < 10
    assert replies[-1]["error"]["code"] == -32009
    assert grown < 60 << 20, f"peak RSS grew by {grown >> 20} MiB"
