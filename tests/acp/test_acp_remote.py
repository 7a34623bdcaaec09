"""gateway.client.RemoteService against the real gateway, and ``loopgate acp --server``."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.messages import Message
from loopgate.contracts.ports import RunFinished, RunNotFound, StartRun
from loopgate.gateway.client import RemoteService
from tests.acp.support import RecordingClient, open_session, spawned
from tests.gateway.harness import running_gateway
from tests.waiting import until

pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.002)]


async def test_remote_service_runs_and_streams(gateway: str) -> None:
    async with RemoteService(gateway) as service:
        info = await service.start(
            StartRun(
                input=[Message(role="user", content="one tool: 2 and 3")],
                thread_id="t-remote",
                metadata={"acp": {"cwd": "/x"}},
                traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
        )
        assert info.thread_id == "t-remote" and info.state == "running"
        kinds: list[str] = []
        async with service.subscribe(info.id) as sub:
            while not sub.done:
                kinds.extend(e.kind for e in await sub.next_batch(5))
        assert kinds[-1] == "completion" and "tool_call_result" in kinds
        history = await service.history(info.id)
        assert [e.kind for e in history] == kinds
        assert [e.seq for e in await service.history(info.id, after=3, limit=2)] == [4, 5]
        listed = await service.list_runs(thread_id="t-remote")
        assert [r.id for r in listed] == [info.id]
        got = await service.get(info.id)
        assert got.status == "completed" and got.input[0].content == "one tool: 2 and 3"
        assert got.metadata["traceparent"].startswith("00-4bf92f")
        assert not (await service.cancel(info.id)).accepted
        with pytest.raises(RunNotFound):
            await service.get("run_missing")
        with pytest.raises(ValueError, match="max_rounds"):
            await service.start(StartRun(input="hi", config={"max_rounds": -1}))


async def test_remote_ingest_push(gateway: str) -> None:
    async with RemoteService(gateway) as service:
        info = await service.start(StartRun(source="ingest"))
        env = await service.push(info.id, LoopEvent("content_delta", {"delta": "hi"}))
        assert env.seq == 1 and env.data == {"delta": "hi"}
        await service.end_ingest(info.id)
        with pytest.raises(RunFinished):
            await service.push(info.id, LoopEvent("content_delta", {"delta": "late"}))


async def test_acp_server_mode_prompts_and_loads(gateway: str) -> None:
    first = RecordingClient(permission="allow_once")
    async with spawned(first, "--server", gateway) as conn:
        session_id = await open_session(conn, cwd="/proj")
        answer = await conn.prompt(session_id=session_id, prompt=[text_block("one tool: 8 and 9")])
        noted = await conn.prompt(session_id=session_id, prompt=[text_block("write note remote")])
    assert answer.stop_reason == noted.stop_reason == "end_turn"
    assert len(first.permission_requests) == 1
    first.check_all_updates()
    async with httpx.AsyncClient(base_url=gateway) as http:
        runs = (await http.get("/v1/runs", params={"thread_id": session_id})).json()["runs"]
    assert len(runs) == 2 and all(r["metadata"]["acp"]["cwd"] == "/proj" for r in runs)

    second = RecordingClient()
    async with spawned(second, "--server", gateway) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd="/proj", session_id=session_id, mcp_servers=[])
    assert [
        u.content.text for _, u in second.updates if u.session_update == "user_message_chunk"
    ] == [
        "one tool: 8 and 9",
        "write note remote",
    ]
    assert second.text() == first.text()


async def run_of(http: httpx.AsyncClient, run_url: str) -> dict[str, Any]:
    run: dict[str, Any] = (await http.get(run_url)).json()
    return run


async def test_load_follows_a_run_that_lives_in_the_gateway(gateway: str) -> None:
    # A run started by someone else (the HTTP API) in thread "shared"; an IDE opens it.
    http = httpx.AsyncClient(base_url=gateway)
    started = (
        await http.post("/v1/runs", json={"input": "slow tool please", "thread_id": "shared-1"})
    ).json()
    run_url = f"/v1/runs/{started['id']}"
    client = RecordingClient()
    got_tool = anyio.Event()
    closed = anyio.Event()

    async def on_update(update: Any) -> None:
        if update.session_update == "tool_call":
            got_tool.set()
        if update.session_update == "tool_call_update" and update.status == "failed":
            closed.set()

    client.on_update = on_update
    async with spawned(client, "--server", gateway) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        with anyio.fail_after(10):
            await until(lambda: run_of(http, run_url), lambda run: run["last_seq"] >= 3)
        await conn.load_session(cwd="/tmp", session_id="shared-1", mcp_servers=[])
        with anyio.fail_after(10):
            await got_tool.wait()
        await conn.cancel(session_id="shared-1")  # the IDE's cancel reaches the gateway run
        with anyio.fail_after(10):
            await closed.wait()  # and the IDE sees the open tool call closed
            await until(lambda: run_of(http, run_url), lambda run: run["state"] == "finished")
    assert (await http.get(run_url)).json()["status"] == "cancelled"
    await http.aclose()
    assert client.kinds()[0] == "user_message_chunk"
    closing = [u for _, u in client.updates if u.session_update == "tool_call_update"]
    assert closing and closing[-1].status == "failed"


async def test_a_gateway_that_does_not_answer_is_named_in_the_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        client = RecordingClient()
        async with spawned(client, "--server", url) as conn:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            # The session is recorded in the gateway: without one there is no session.
            with pytest.raises(RequestError) as raised:
                await conn.new_session(cwd="/tmp", mcp_servers=[])
    assert raised.value.code == -32603
    assert f"cannot reach the gateway at {url}" in str(raised.value)
    assert "log has the details" not in str(raised.value)


async def test_a_gateway_gone_after_session_new_is_named_in_the_prompts_error(
    tmp_path: Path,
) -> None:
    client = RecordingClient()
    with contextlib.ExitStack() as gateway_running:
        url, _server = gateway_running.enter_context(
            running_gateway(scripted_delay_s=0.002, workspace=str(tmp_path))
        )
        async with spawned(client, "--server", url) as conn:
            session_id = await open_session(conn)
            gateway_running.close()  # the gateway stops; the agent goes on
            with pytest.raises(RequestError) as raised:
                await conn.prompt(session_id=session_id, prompt=[text_block("hello")])
    assert raised.value.code == -32603
    assert f"cannot reach the gateway at {url}" in str(raised.value)
    assert "log has the details" not in str(raised.value)
