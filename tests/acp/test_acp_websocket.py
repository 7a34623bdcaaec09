"""ACP over WebSocket at /acp on the real gateway (uvicorn), driven by the Python SDK's client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import websockets
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient, prompt_cancelled_mid_tool

pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.002)]


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/acp"


@asynccontextmanager
async def ws_client(base: str, client: RecordingClient) -> AsyncIterator[Any]:
    transport = await create_websocket_stream(ws_url(base))
    conn = connect_to_agent(client, transport, observers=[client.observe])
    try:
        yield conn
    finally:
        await conn.close()


async def test_prompt_permission_and_cancel_over_websocket(gateway: str) -> None:
    client = RecordingClient(permission="reject_once")
    async with ws_client(gateway, client) as conn:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=session_id, prompt=[text_block("one tool: 6 and 7")])
        rejected = await conn.prompt(session_id=session_id, prompt=[text_block("write note ws")])
        cancelled = await prompt_cancelled_mid_tool(conn, client, session_id, "slow tool now")
    assert init.agent_capabilities.load_session is True
    assert answer.stop_reason == rejected.stop_reason == "end_turn"
    assert cancelled.stop_reason == "cancelled"
    assert len(client.permission_requests) == 1
    client.check_all_updates()
    # The session is a thread of the gateway: its runs are visible to every other protocol.
    async with httpx.AsyncClient(base_url=gateway) as http:
        runs = (await http.get("/v1/runs", params={"thread_id": session_id})).json()["runs"]
    assert sorted(r["status"] for r in runs) == ["cancelled", "completed", "completed"]


async def test_a_second_socket_loads_the_session(gateway: str) -> None:
    first = RecordingClient()
    async with ws_client(gateway, first) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd="/srv", mcp_servers=[])).session_id
        await conn.prompt(session_id=session_id, prompt=[text_block("plain over ws")])
    second = RecordingClient()
    async with ws_client(gateway, second) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        listed = await conn.list_sessions(cwd="/srv")
        await conn.load_session(cwd="/srv", session_id=session_id, mcp_servers=[])
    assert session_id in [s.session_id for s in listed.sessions]
    assert second.kinds()[0] == "user_message_chunk"
    assert second.text() == first.text()


async def test_bad_frames_are_answered(gateway: str) -> None:
    async with websockets.connect(ws_url(gateway)) as ws:
        await ws.send("{not json")
        parse = json.loads(await ws.recv())
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/nope"}))
        unknown = json.loads(await ws.recv())
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}))
        invalid = json.loads(await ws.recv())
    assert (parse["id"], parse["error"]["code"]) == (None, -32700)
    # The shared validator's words (adapters.shared.jsonrpc), after the code's message.
    assert parse["error"]["message"].startswith("Parse error: not valid JSON: ")
    assert unknown["error"]["code"] == -32601
    assert invalid["error"]["message"] == "Invalid params: protocolVersion: Field required"


async def test_foreign_origin_is_refused(gateway: str) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(ws_url(gateway), origin="https://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    async with websockets.connect(ws_url(gateway), origin="http://localhost:3000") as ws:
        await ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
        )
        assert json.loads(await ws.recv())["result"]["protocolVersion"] == 1
