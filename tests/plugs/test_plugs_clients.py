"""Each plug (Python, HTTP, stdio) driven by real clients: @ag-ui/client's HttpAgent (Node) and
the ACP Python SDK over /acp. They see the loop's exact text and tool calls, steer it, and
answer its permission requests (ACP session/request_permission; AG-UI interrupt + resume)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient
from tests.agui.node_client import clean
from tests.node_clients import run_script
from tests.plugs.plugs import PLUGS, plugged_gateway

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=PLUGS)
def gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    with plugged_gateway(request.param) as (base, _):
        yield base


def agui(base: str, *args: str) -> dict[str, Any]:
    return run_script("agui-plug.mjs", base, *args, timeout=120)


def deltas(summary: dict[str, Any]) -> list[str]:
    return [e["delta"] for e in summary["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]


def test_agui_http_agent_sees_the_loops_text_and_tools(gateway: str) -> None:
    seen = agui(gateway, "text", "tool")
    text, tool = clean(seen["text"]), clean(seen["tool"])
    assert deltas(text) == ["you ", "said: ", "hello ", "from ", "agui"]
    assert text["terminal"]["type"] == "RUN_FINISHED"
    starts = [e for e in tool["events"] if e["type"] == "TOOL_CALL_START"]
    results = [e for e in tool["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [(s["toolCallId"], s["toolCallName"]) for s in starts] == [("call_1", "lookup")]
    assert [(r["toolCallId"], r["content"]) for r in results] == [("call_1", "42")]
    assert deltas(tool) == ["the answer ", "is 42"]
    assert tool["terminal"]["type"] == "RUN_FINISHED"


def test_agui_client_steers_the_loop(gateway: str) -> None:
    run = clean(agui(gateway, "steer")["steer"])
    assert "[steered: go left] " in deltas(run)
    assert run["terminal"]["type"] == "RUN_FINISHED"
    assert run["terminal"]["outcome"] == {"type": "cancelled"}


@pytest.mark.parametrize("decision", ["allow_once", "reject_always"])
def test_agui_client_answers_the_loops_permission_request(gateway: str, decision: str) -> None:
    seen = agui(gateway, "approval", "--decision", decision)["approval"]
    first, second = clean(seen["first"]), clean(seen["second"])
    [interrupt] = seen["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == "call_w"
    assert interrupt["message"] == "Allow write?"
    assert first["terminal"]["outcome"]["type"] == "interrupt"
    # The resumed stream is the same run, going on after the question.
    assert second["types"][0] == "RUN_STARTED"
    assert second["events"][0]["runId"] == first["events"][0]["runId"]
    assert deltas(second) == [f"decision: {decision}"]
    assert second["terminal"]["type"] == "RUN_FINISHED" and "outcome" not in second["terminal"]
    results = [
        e["value"]
        for e in second["events"]
        if e["type"] == "CUSTOM" and e["name"] == "loopgate.permission_result"
    ]
    assert [(r["decision"], r["by"]) for r in results] == [(decision, "client")]


async def test_acp_client_sees_the_loops_text_and_tools(gateway: str) -> None:
    client = RecordingClient()
    transport = await create_websocket_stream(gateway.replace("http://", "ws://") + "/acp")
    conn = connect_to_agent(client, transport, observers=[client.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=session, prompt=[text_block("tool please")])
    finally:
        await conn.close()
    assert answer.stop_reason == "end_turn"
    assert client.text() == "the answer is 42"
    calls = [u for _, u in client.updates if u.session_update == "tool_call"]
    assert [(c.tool_call_id, c.title) for c in calls] == [("call_1", "lookup: x")]
    client.check_all_updates()


@pytest.mark.parametrize("decision", ["allow_once", "reject_once"])
async def test_acp_client_answers_the_loops_permission_request(gateway: str, decision: str) -> None:
    client = RecordingClient(permission=decision)
    transport = await create_websocket_stream(gateway.replace("http://", "ws://") + "/acp")
    conn = connect_to_agent(client, transport, observers=[client.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=session, prompt=[text_block("ask first")])
    finally:
        await conn.close()
    assert answer.stop_reason == "end_turn"
    [asked] = client.permission_requests
    assert asked["toolCall"]["toolCallId"] == "call_w"
    assert client.text() == f"decision: {decision}"
    async with httpx.AsyncClient(base_url=gateway) as http:
        [run] = (await http.get("/v1/runs", params={"thread_id": session})).json()["runs"]
        events = (
            await http.post(
                "/rpc",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "run.events",
                    "params": {"runId": run["id"]},
                },
            )
        ).json()["result"]["events"]
    results = [e["data"] for e in events if e["kind"] == "permission_result"]
    assert [(r["decision"], r["by"]) for r in results] == [(decision, "client")]
