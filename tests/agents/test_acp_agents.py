"""ACP sessions choose their agent with a session config option, on a gateway serving two
(coder, the default, and parrot): the official Python SDK over stdio (``loopgate acp -c FILE``)
and over the WebSocket at /acp, and the TypeScript SDK over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, schema, text_block
from acp.ws import create_websocket_stream

from tests.acp.support import REPO, RecordingClient, agent_env, check_strict, spawned
from tests.agents.roster import PREFIX, TWO_AGENTS_TOML, two_agent_settings, write_two_agents
from tests.node_clients import NODE_DIR, node_clients

pytestmark = [pytest.mark.anyio, pytest.mark.gateway(agents=two_agent_settings().agents)]

CODER_SAYS = "this answer comes straight from the scripted model"
REFUSED = "Invalid params: value: no agent named 'nobody'; this gateway serves: coder, parrot"


def agent_option(current: str) -> dict[str, Any]:
    """The option as ACP's SessionConfigOptionSelect, every agent served a choice."""
    return {
        "id": "agent",
        "name": "Agent",
        "description": "The agent that answers this session's prompts",
        "category": "mode",
        "type": "select",
        "currentValue": current,
        "options": [
            {"value": "coder", "name": "coder", "description": "Writes and explains code"},
            {"value": "parrot", "name": "parrot", "description": "Repeats what you say"},
        ],
    }


def answer_to(client: RecordingClient, key: str) -> dict[str, Any]:
    """The raw result of the newest answer holding ``key`` (as it came over the wire)."""
    return next(m["result"] for m in reversed(client.raw_in) if key in m.get("result", {}))


def current_agent(options: list[Any]) -> str:
    return next(o.current_value for o in options if o.id == "agent")


async def say(conn: Any, client: RecordingClient, session_id: str, text: str) -> str:
    """Prompt, and the text of the answer."""
    client.updates.clear()
    answer = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
    assert answer.stop_reason == "end_turn"
    return client.text()


async def test_stdio_session_chooses_switches_and_keeps_its_agent(tmp_path: Path) -> None:
    config = str(write_two_agents(tmp_path))
    journal = f"sqlite:{tmp_path / 'journal.db'}"
    client = RecordingClient()
    async with spawned(client, "-c", config, "--journal", journal) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        created = check_strict(schema.NewSessionResponse, answer_to(client, "sessionId"))
        raw_options = answer_to(client, "sessionId")["configOptions"]
        assert raw_options[0] == agent_option("coder")
        assert [o["id"] for o in raw_options] == ["agent", "approval"]
        assert current_agent(created.config_options) == "coder"
        assert CODER_SAYS in await say(conn, client, session_id, "plain hello")

        switched = await conn.set_config_option(
            session_id=session_id, config_id="agent", value="parrot"
        )
        check_strict(schema.SetSessionConfigOptionResponse, answer_to(client, "configOptions"))
        assert current_agent(switched.config_options) == "parrot"
        assert await say(conn, client, session_id, "hi there") == PREFIX + "hi there"

        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(session_id=session_id, config_id="agent", value="nobody")
        assert refused.value.code == -32602
        assert str(refused.value) == REFUSED
        assert refused.value.data == {"field": "value", "agents": ["coder", "parrot"]}
        # Refused, nothing changed: the parrot still answers.
        assert await say(conn, client, session_id, "still you?") == PREFIX + "still you?"

    # Another process (another IDE window): the loaded session is on its thread's agent.
    again = RecordingClient()
    async with spawned(again, "-c", config, "--journal", journal) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        loaded = await conn.load_session(cwd="/tmp", session_id=session_id, mcp_servers=[])
        assert current_agent(loaded.config_options) == "parrot"
        assert await say(conn, again, session_id, "after load") == PREFIX + "after load"


async def test_a_thread_whose_agent_is_gone_goes_on_with_the_default(tmp_path: Path) -> None:
    journal = f"sqlite:{tmp_path / 'journal.db'}"
    client = RecordingClient()
    async with spawned(client, "-c", str(write_two_agents(tmp_path)), "--journal", journal) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        await conn.set_config_option(session_id=session_id, config_id="agent", value="parrot")
        assert await say(conn, client, session_id, "hi") == PREFIX + "hi"
    # The gateway restarted without the parrot: the selector shows the default, which answers.
    renamed = tmp_path / "renamed.toml"
    renamed.write_text(TWO_AGENTS_TOML.replace("[agents.parrot]", "[agents.echo]"))
    again = RecordingClient()
    async with spawned(again, "-c", str(renamed), "--journal", journal) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        resumed = await conn.resume_session(cwd="/tmp", session_id=session_id, mcp_servers=[])
        assert current_agent(resumed.config_options) == "coder"
        assert CODER_SAYS in await say(conn, again, session_id, "plain again")


async def test_one_agent_offers_no_agent_option() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        options = answer_to(client, "sessionId")["configOptions"]
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(session_id=session_id, config_id="agent", value="coder")
    assert [o["id"] for o in options] == ["approval"]
    assert refused.value.code == -32602
    assert str(refused.value) == "Invalid params: configId: unknown option 'agent' (have: approval)"


async def open_socket(base: str, client: RecordingClient) -> Any:
    transport = await create_websocket_stream(base.replace("http://", "ws://") + "/acp")
    return connect_to_agent(client, transport, observers=[client.observe])


async def test_websocket_switches_the_thread_between_agents(gateway: str) -> None:
    client = RecordingClient()
    conn = await open_socket(gateway, client)
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        created = await conn.new_session(cwd="/srv", mcp_servers=[])
        session_id = created.session_id
        assert answer_to(client, "sessionId")["configOptions"][0] == agent_option("coder")
        assert CODER_SAYS in await say(conn, client, session_id, "plain hello")
        await conn.set_config_option(session_id=session_id, config_id="agent", value="parrot")
        assert await say(conn, client, session_id, "hi there") == PREFIX + "hi there"
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(session_id=session_id, config_id="agent", value="nobody")
        assert refused.value.code == -32602 and str(refused.value) == REFUSED
        # Back to the coder, which reads the whole conversation, the parrot's turn included.
        await conn.set_config_option(session_id=session_id, config_id="agent", value="coder")
        recalled = await say(conn, client, session_id, "what did I say")
        assert recalled == "Before this you said: “plain hello”; “hi there”."
        await conn.set_config_option(session_id=session_id, config_id="agent", value="parrot")
        assert await say(conn, client, session_id, "bye") == PREFIX + "bye"
    finally:
        await conn.close()
    async with httpx.AsyncClient(base_url=gateway) as http:
        runs = (await http.get("/v1/runs", params={"thread_id": session_id})).json()["runs"]
    assert [r["agent"] for r in sorted(runs, key=lambda r: r["created_at"])] == [
        "coder",
        "parrot",
        "coder",
        "parrot",
    ]
    # A second socket resumes the session on its thread's agent, which answers its prompt.
    other = RecordingClient()
    conn = await open_socket(gateway, other)
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        resumed = await conn.resume_session(cwd="/srv", session_id=session_id, mcp_servers=[])
        assert current_agent(resumed.config_options) == "parrot"
        assert await say(conn, other, session_id, "resumed") == PREFIX + "resumed"
    finally:
        await conn.close()


async def test_acp_attached_to_a_gateway_offers_its_agents(gateway: str) -> None:
    client = RecordingClient()
    async with spawned(client, "--server", gateway) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session_id = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        assert answer_to(client, "sessionId")["configOptions"][0] == agent_option("coder")
        await conn.set_config_option(session_id=session_id, config_id="agent", value="parrot")
        assert await say(conn, client, session_id, "remote") == PREFIX + "remote"


def test_the_typescript_sdk_switches_the_agent(tmp_path: Path) -> None:
    node = node_clients()
    config = str(write_two_agents(tmp_path))
    command = [sys.executable, "-m", "loopgate", "acp", "-c", config]
    done = subprocess.run(
        [node, str(NODE_DIR / "agents-acp.mjs"), *command],
        cwd=REPO,
        env={**os.environ, **agent_env()},
        capture_output=True,
        timeout=60,
    )
    summary = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert done.returncode == 0 and summary["ok"], summary
    assert summary["created"] == agent_option("coder")
    assert summary["optionIds"] == ["agent", "approval"]
    assert summary["first"]["stopReason"] == "end_turn"
    assert CODER_SAYS in summary["first"]["text"]
    assert summary["switched"] == "parrot"
    assert summary["second"] == {"stopReason": "end_turn", "text": PREFIX + "hi from node"}
    assert summary["refused"] == {
        "code": -32602,
        "message": REFUSED,
        "data": {"field": "value", "agents": ["coder", "parrot"]},
    }
