"""A real WebSocket client (``websockets``) against the gateway on uvicorn: ``GET /rpc/ws``."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.jsonrpc.jsonrpc_support import RpcSocket, events_of, rpc_connect
from tests.waiting import until

MAX_MESSAGE = 64 * 1024
MAX_FRAME = 256 * 1024
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.gateway(
        scripted_delay_s=0.002, max_body_bytes=MAX_MESSAGE, max_frame_bytes=MAX_FRAME
    ),
]


def assert_gapless(events: list[dict[str, Any]], first: int = 1) -> None:
    assert [e["seq"] for e in events] == list(range(first, first + len(events)))


async def test_start_and_subscribe_gets_every_event_in_order(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        # The response carrying the subscription id comes before any of its notifications.
        await rpc.send(
            {"jsonrpc": "2.0", "id": "s", "method": "run.start",
             "params": {"input": "what time is it and what is 6*7?", "subscribe": True}}
        )  # fmt: skip
        first = await rpc.recv()
        assert first["id"] == "s", first
        sub, run_id = first["result"]["subscription"], first["result"]["runId"]
        messages = await rpc.until_end(sub)
        events = events_of(messages)
        assert_gapless(events)
        assert {e["run_id"] for e in events} == {run_id}
        end = messages[-1]["params"]
        assert end == {
            "subscription": sub,
            "runId": run_id,
            "status": "completed",
            "lastSeq": events[-1]["seq"],
        }
        assert events[-1]["kind"] == "completion"
        page = await rpc.result("run.events", {"runId": run_id, "limit": 1000})
        assert page["events"] == events and page["done"] is True


async def test_subscribe_after_a_cursor_and_unsubscribe(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        run_id = (await rpc.result("run.start", {"input": "plain"}))["runId"]
        done = await rpc.result("run.subscribe", {"runId": run_id})
        total = events_of(await rpc.until_end(done["subscription"]))
        resumed = await rpc.result("run.subscribe", [run_id, 5])
        assert resumed["subscription"] != done["subscription"]
        tail = events_of(await rpc.until_end(resumed["subscription"]))
        assert tail == total[5:]
        # A live run: unsubscribing stops its notifications.
        forever = (await rpc.result("run.start", {"input": "forever"}))["runId"]
        sub = (await rpc.result("run.subscribe", {"runId": forever}))["subscription"]
        assert await rpc.result("run.unsubscribe", {"subscription": sub}) is True
        rpc.inbox.clear()
        # The run goes on for ten more events: none of them reach the dropped subscription.
        since = (await rpc.result("run.get", [forever]))["lastSeq"]
        with anyio.fail_after(10):
            await until(
                lambda: rpc.result("run.get", [forever]), lambda run: run["lastSeq"] >= since + 10
            )
        assert not [m for m in rpc.inbox if m.get("params", {}).get("subscription") == sub]
        again = await rpc.call("run.unsubscribe", {"subscription": sub})
        assert again["error"]["code"] == -32005
        await rpc.result("run.cancel", [forever])


async def test_cancel_mid_run(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        started = await rpc.result("run.start", {"input": "forever", "subscribe": True})
        seen = 0
        while seen < 5:
            message = await rpc.recv()
            seen += message.get("method") == "run.event"
        cancel = await rpc.result("run.cancel", {"runId": started["runId"]})
        assert cancel["accepted"] is True
        messages = await rpc.until_end(started["subscription"])
        events = events_of(messages)
        assert events[-1]["kind"] == "completion"
        assert events[-1]["data"]["status"] == "cancelled"
        assert messages[-1]["params"]["status"] == "cancelled"


async def test_resume_after_reconnect(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        started = await rpc.result("run.start", {"input": "forever", "subscribe": True})
        run_id = started["runId"]
        before: list[dict[str, Any]] = []
        while len(before) < 8:
            message = await rpc.recv()
            if message.get("method") == "run.event":
                before.append(message["params"]["event"])
    # The connection is gone: its subscription ended with it.
    with anyio.fail_after(5):
        await until(lambda: rpc_get(gateway, run_id), lambda run: run["subscribers"] == 0)
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        last = before[-1]["seq"]
        sub = (await rpc.result("run.subscribe", {"runId": run_id, "after": last}))["subscription"]
        await rpc.result("run.cancel", [run_id])
        after = events_of(await rpc.until_end(sub))
        assert_gapless(before + after)
        assert after[-1]["data"]["status"] == "cancelled"


async def test_permission_request_answered_over_the_socket(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        started = await rpc.result(
            "run.start",
            {"input": "what time is it and what is 6*7?", "approval": "always", "subscribe": True},
        )
        asked: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        decisions = iter(["allow_once", "reject_once"])
        with anyio.fail_after(20):
            while True:
                message = await rpc.recv()
                if message.get("method") == "run.permission":
                    asked.append(message)
                    await rpc.send(
                        {"jsonrpc": "2.0", "id": message["id"],
                         "result": {"decision": next(decisions)}}
                    )  # fmt: skip
                elif message.get("method") == "run.event":
                    events.append(message["params"]["event"])
                elif message.get("method") == "run.end":
                    break
        assert [a["id"] for a in asked] == ["loopgate:1", "loopgate:2"]
        requests = [e for e in events if e["kind"] == "permission_request"]
        assert [a["params"]["requestId"] for a in asked] == [
            e["data"]["requestId"] for e in requests
        ]
        assert asked[0]["params"]["runId"] == started["runId"]
        assert asked[0]["params"]["subscription"] == started["subscription"]
        assert asked[0]["params"]["toolCall"]["name"] == "clock"
        assert "allow_once" in asked[0]["params"]["options"]
        outcome = [
            (e["data"]["decision"], e["data"]["by"])
            for e in events
            if e["kind"] == "permission_result"
        ]
        assert outcome == [("allow_once", "client"), ("reject_once", "client")]
        results = {e["data"]["name"]: e["data"] for e in events if e["kind"] == "tool_call_result"}
        assert results["clock"]["success"] is True
        assert results["calculate"]["success"] is False


async def test_errors_keep_the_connection_open(gateway: str) -> None:
    async with rpc_connect(gateway, max_size=None) as ws:
        rpc = RpcSocket(ws)
        await rpc.send("{not json")
        assert (await rpc.recv())["error"]["code"] == -32700
        await rpc.send("[]")
        assert (await rpc.recv())["error"]["code"] == -32600
        await rpc.send(json.dumps([{"jsonrpc": "2.0", "method": "run.list"}]))  # notifications
        await rpc.send(b'[{"jsonrpc": "2.0", "method": "run.list", "id": 1}, 7]')  # binary frame
        batch = await rpc.recv()
        assert "runs" in batch[0]["result"] and batch[1]["error"]["code"] == -32600
        too_big = json.dumps({"jsonrpc": "2.0", "method": "run.get", "id": 2,
                              "params": {"runId": "x" * MAX_MESSAGE}})  # fmt: skip
        await rpc.send(too_big)
        reply = await rpc.recv()
        assert reply["error"]["code"] == -32006 and reply["id"] is None
        assert str(MAX_MESSAGE) in reply["error"]["data"]["detail"]
        assert (await rpc.result("run.list"))["runs"] is not None
        # A reply to a request the server never sent is ignored, not answered.
        await rpc.send({"jsonrpc": "2.0", "id": "loopgate:999", "result": {"decision": "x"}})
        assert (await rpc.call("run.list", {"limit": 1}))["id"] == rpc._next
        # Beyond the frame limit uvicorn closes the connection with 1009 (message too big).
        await ws.send("x" * (MAX_FRAME + 1))
        with pytest.raises(ConnectionClosed) as closed:
            await rpc.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_cross_site_origins_are_refused(gateway: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with rpc_connect(gateway, origin="https://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    async with rpc_connect(gateway, origin="http://localhost:3000") as ws:
        assert "runs" in await RpcSocket(ws).result("run.list")


async def rpc_get(base: str, run_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base) as client:
        response = await client.post(
            "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "run.get", "params": [run_id]}
        )
    return response.json()["result"]
