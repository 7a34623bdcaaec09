"""Any front end can watch a run it did not start — an ingested one included — from its start
or from a cursor, live: AG-UI (forwardedProps.loopgate.attach), JSON-RPC (run.subscribe), ACP
(session/load of the run's thread)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import httpx
import pytest
from acp import PROTOCOL_VERSION, connect_to_agent
from acp.ws import create_websocket_stream
from websockets.asyncio.client import connect

from tests.acp.support import RecordingClient
from tests.agui.node_client import clean
from tests.node_clients import NODE_DIR, node_clients
from tests.waiting import wait_until

pytestmark = pytest.mark.anyio

WORDS = ["one ", "two ", "three ", "four"]


def ingest_run(base: str) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"source": "ingest"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def push(base: str, run_id: str, events: list[dict[str, Any]], end: bool = False) -> None:
    body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    response = httpx.post(
        f"{base}/v1/runs/{run_id}/events",
        content=body,
        params={"end": "1"} if end else None,
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def deltas(words: list[str]) -> list[dict[str, Any]]:
    return [{"kind": "content_delta", "data": {"delta": w}} for w in words]


FINISH = {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


def wait_for_subscribers(base: str, run_id: str, count: int) -> None:
    def subscribers() -> int:
        found: int = httpx.get(f"{base}/v1/runs/{run_id}").json()["subscribers"]
        return found

    wait_until(lambda: subscribers() >= count, 20, "the client to attach")


@pytest.mark.parametrize("after", [0, 2])
def test_agui_client_attaches_to_an_ingested_run(gateway: str, after: int) -> None:
    run_id = ingest_run(gateway)
    push(gateway, run_id, deltas(WORDS[:2]))
    node = subprocess.Popen(
        [
            node_clients(),
            str(NODE_DIR / "agui-plug.mjs"),
            gateway,
            "attach",
            "--attach",
            run_id,
            "--after",
            str(after),
        ],
        cwd=NODE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_subscribers(gateway, run_id, 1)
        push(gateway, run_id, [*deltas(WORDS[2:]), FINISH])
        out, err = node.communicate(timeout=60)
    finally:
        node.kill()
    assert node.returncode == 0, err[-3000:]
    run = clean(json.loads(out)["attach"])
    assert run["events"][0]["runId"] == run_id
    text = [e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert text == WORDS[after:]
    assert run["terminal"]["type"] == "RUN_FINISHED"
    # Watching never drives: the run was not cancelled when the client went away.
    assert httpx.get(f"{gateway}/v1/runs/{run_id}").json()["status"] == "completed"


def test_agui_attach_to_a_run_that_does_not_exist_is_404(gateway: str) -> None:
    body = {
        "threadId": "t",
        "runId": "no-such-run",
        "messages": [],
        "forwardedProps": {"loopgate": {"attach": True}},
    }
    response = httpx.post(f"{gateway}/agui", json=body)
    assert response.status_code == 404
    assert response.json()["detail"] == "no run with id 'no-such-run'"
    body["forwardedProps"] = {"loopgate": {"attach": True, "after": "x"}}
    assert httpx.post(f"{gateway}/agui", json=body).status_code == 422


async def test_jsonrpc_client_subscribes_to_an_ingested_run_from_a_cursor(gateway: str) -> None:
    run_id = ingest_run(gateway)
    push(gateway, run_id, deltas(WORDS[:2]))
    seen: list[dict[str, Any]] = []
    async with connect(gateway.replace("http://", "ws://") + "/rpc/ws") as ws:
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "run.subscribe",
                    "params": {"runId": run_id, "after": 1},
                }
            )
        )
        with anyio.fail_after(20):
            async for raw in ws:
                message = json.loads(raw)
                if message.get("id") == 1:
                    # Subscribed: the rest of the run happens live.
                    await anyio.to_thread.run_sync(
                        push, gateway, run_id, [*deltas(WORDS[2:]), FINISH]
                    )
                elif message.get("method") == "run.event":
                    seen.append(message["params"]["event"])
                elif message.get("method") == "run.end":
                    break
    assert [e["seq"] for e in seen] == [2, 3, 4, 5]
    assert [e["data"].get("delta") for e in seen[:-1]] == WORDS[1:]


async def test_acp_client_loads_an_ingested_runs_thread_and_follows_it_live(gateway: str) -> None:
    run_id = ingest_run(gateway)
    push(gateway, run_id, deltas(WORDS[:2]))
    client = RecordingClient()
    finished = anyio.Event()

    async def on_update(update: Any) -> None:
        if client.text() == "".join(WORDS):
            finished.set()

    client.on_update = on_update
    transport = await create_websocket_stream(gateway.replace("http://", "ws://") + "/acp")
    conn = connect_to_agent(client, transport, observers=[client.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        # An ingested run's thread is the run itself, unless the loop named one.
        await conn.load_session(session_id=run_id, cwd="/tmp", mcp_servers=[])
        assert client.text() == "".join(WORDS[:2])  # the replay, before the answer
        await anyio.to_thread.run_sync(push, gateway, run_id, [*deltas(WORDS[2:]), FINISH])
        with anyio.fail_after(20):
            await finished.wait()
    finally:
        await conn.close()
    client.check_all_updates()
