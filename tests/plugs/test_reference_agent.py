"""The reference loop as a usable agent on a live gateway: the user's Python functions
(--tools), a system prompt, MCP servers (--mcp, --mcp-url, an ACP client's mcpServers) as tool
sources, the demo tools only when asked for or with the scripted model.

The model is the fake OpenAI-compatible server's "agent" scenario: ``use NAME {json}`` calls
tool NAME, then it answers ``NAME said: <result>`` — so what streams out proves the tool ran."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import HttpMcpServer, McpServerStdio
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient, agent_env, open_session, spawned
from tests.agui.node_client import clean
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.node_clients import node_clients, run_script
from tests.tools.conftest import EVERYTHING, FAKE_SERVER, fake_http_server

pytestmark = pytest.mark.anyio
FAKE_MCP = shlex.join([sys.executable, str(FAKE_SERVER)])


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with serve_app(fake.app) as url:
        yield fake, f"{url}/v1"


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with fake_http_server() as (url, _):
        yield url


def agent_settings(model: tuple[FakeOpenAI, str], **more: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "openai_base_url": model[1],
        "openai_model": "agent",
        "mcp_connect_timeout_s": 20.0,
        **more,
    }


def acp_agent_env(model: tuple[FakeOpenAI, str]) -> dict[str, str]:
    """What ``loopgate acp`` needs in its environment to run the agent model."""
    return agent_env(
        LOOPGATE_PROVIDER="openai",
        LOOPGATE_OPENAI_BASE_URL=model[1],
        LOOPGATE_OPENAI_MODEL="agent",
        LOOPGATE_MCP_CONNECT_TIMEOUT_S="20",
    )


def fake_stdio_server() -> McpServerStdio:
    return McpServerStdio(name="fake", command=sys.executable, args=[str(FAKE_SERVER)], env=[])


def run(base: str, prompt: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=10)
    assert response.status_code == 201, response.text
    return envelopes(read_stream(base, response.json()["id"]))


def outcome(events: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(the tool that ran, its result preview, the answer)."""
    [result] = [e["data"] for e in events if e["kind"] == "tool_call_result"]
    text = "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")
    assert events[-1]["data"]["status"] == "completed", events[-1]
    return result["name"], result["resultPreview"], text


def offered(fake: FakeOpenAI) -> list[str]:
    return sorted(t["function"]["name"] for t in fake.requests[-1].body.get("tools") or [])


def test_python_functions_are_tools_and_the_system_prompt_leads(
    model: tuple[FakeOpenAI, str],
) -> None:
    fake = model[0]
    settings = agent_settings(
        model, tools=["tests.tools.sample_tools"], system_prompt="You are terse."
    )
    with running_gateway(**settings) as (base, _):
        events = run(base, 'use google {"city": "Oslo", "days": 2}')
    assert outcome(events) == ("google", "Oslo 2 metric", "google said: Oslo 2 metric")
    first = fake.requests[-2].body
    assert first["messages"][0] == {"role": "system", "content": "You are terse."}
    google = next(t["function"] for t in first["tools"] if t["function"]["name"] == "google")
    assert google["description"].startswith("Forecast the weather.")
    assert google["parameters"]["properties"]["city"]["description"] == "The city to forecast for."
    # A real model gets no demo tools unless asked.
    assert "clock" not in offered(fake)


def test_demo_tools_on_request_and_a_system_prompt_file(
    model: tuple[FakeOpenAI, str], tmp_path: Any
) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("From a file.")
    settings = agent_settings(model, demo_tools=True, system_prompt_file=str(prompt))
    with running_gateway(**settings) as (base, _):
        events = run(base, 'use calculate {"expression": "6 * 7"}')
    assert outcome(events) == ("calculate", "42", "calculate said: 42")
    assert model[0].requests[-1].body["messages"][0]["content"] == "From a file."
    assert "clock" in offered(model[0])


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_mcp_server_of_the_sdk_streams_its_result_to_every_front_end(
    model: tuple[FakeOpenAI, str], mcp_url: str, transport: str
) -> None:
    servers = {"mcp": [FAKE_MCP]} if transport == "stdio" else {"mcp_url": [mcp_url]}
    with running_gateway(**agent_settings(model, **servers)) as (base, _):
        events = run(base, 'use add {"a": 2, "b": 3}')
        seen = run_script("agui-plug.mjs", base, "text", "--prompt", 'use echo {"text": "hi"}')
    assert outcome(events) == ("add", "5", "add said: 5")
    agui = clean(seen["text"])
    [result] = [e for e in agui["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "hi"
    text = "".join(e["delta"] for e in agui["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "echo said: hi"


def test_the_npm_everything_server_over_stdio(model: tuple[FakeOpenAI, str]) -> None:
    command = shlex.join([node_clients(), str(EVERYTHING)])
    with running_gateway(**agent_settings(model, mcp=[command])) as (base, _):
        events = run(base, 'use echo {"message": "from npm"}')
    name, preview, text = outcome(events)
    assert name == "echo" and "from npm" in preview and text.startswith("echo said: ")


def test_a_configured_mcp_server_that_cannot_start_fails_runs_not_the_gateway(
    model: tuple[FakeOpenAI, str], caplog: pytest.LogCaptureFixture
) -> None:
    settings = agent_settings(model, mcp=["/nonexistent/mcp-server"], mcp_connect_timeout_s=2.0)
    with running_gateway(**settings) as (base, _):
        events = run(base, "hello")
        assert httpx.get(f"{base}/healthz").status_code == 200
    *_, error, completion = events
    assert completion["data"]["reason"] == "tools_unavailable"
    assert error["data"]["message"] == completion["data"]["message"]
    assert "MCP server 'mcp-server' could not be used" in error["data"]["message"]
    assert "MCP server 'mcp-server' could not be started" in caplog.text


async def test_an_acp_clients_mcp_servers_are_used_by_loopgate_acp(
    model: tuple[FakeOpenAI, str],
) -> None:
    client = RecordingClient()
    env, server = acp_agent_env(model), fake_stdio_server()
    async with spawned(client, env=env) as conn:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = (await conn.new_session(cwd="/tmp", mcp_servers=[server])).session_id
        answer = await conn.prompt(
            session_id=session, prompt=[text_block('use add {"a": 1, "b": 1}')]
        )
        bare = await open_session(conn)
        plain = await conn.prompt(session_id=bare, prompt=[text_block('use add {"a": 1, "b": 1}')])
    assert init.agent_capabilities.mcp_capabilities.http is True
    assert answer.stop_reason == plain.stop_reason == "end_turn"
    # The session with the server got its tool; the other session did not have it.
    assert client.text().startswith("add said: 2")
    calls = [u for _, u in client.updates if u.session_update == "tool_call_update"]
    assert any(getattr(u, "status", None) == "failed" for u in calls)


async def test_remote_acp_clients_may_name_http_mcp_servers_only(
    model: tuple[FakeOpenAI, str], mcp_url: str
) -> None:
    client = RecordingClient()
    with running_gateway(**agent_settings(model)) as (base, _):
        transport = await create_websocket_stream(base.replace("http://", "ws://") + "/acp")
        conn = connect_to_agent(client, transport, observers=[client.observe])
        try:
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            stdio = McpServerStdio(name="local", command="rm", args=["-rf", "/"], env=[])
            with pytest.raises(Exception) as refused:
                await conn.new_session(cwd="/tmp", mcp_servers=[stdio])
            http = HttpMcpServer(type="http", name="web", url=mcp_url, headers=[])
            session = (await conn.new_session(cwd="/tmp", mcp_servers=[http])).session_id
            answer = await conn.prompt(
                session_id=session, prompt=[text_block('use echo {"text": "remote"}')]
            )
        finally:
            await conn.close()
    assert init.agent_capabilities.mcp_capabilities.http is True
    detail = json.dumps(getattr(refused.value, "data", None) or str(refused.value))
    assert "starts no programs for clients on the network" in str(refused.value) + detail
    assert answer.stop_reason == "end_turn"
    assert client.text() == "echo said: remote"


async def test_closing_an_acp_session_stops_its_mcp_servers(model: tuple[FakeOpenAI, str]) -> None:
    client = RecordingClient()
    env, server = acp_agent_env(model), fake_stdio_server()
    async with spawned(client, env=env) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = (await conn.new_session(cwd="/tmp", mcp_servers=[server])).session_id
        await conn.prompt(session_id=session, prompt=[text_block("use pid {}")])
        pid = int(client.text().removeprefix("pid said: "))
        # Readable once the process has exited: an event to wait on, not a poll.
        exited = os.pidfd_open(pid)
        try:
            await conn.close_session(session_id=session)
            with anyio.fail_after(15):
                await anyio.wait_readable(exited)
        finally:
            os.close(exited)
