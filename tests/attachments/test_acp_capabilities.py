"""ACP advertises per agent: a connection for one agent (``/agents/NAME/acp``, ``loopgate acp
--agent NAME``) says in ``promptCapabilities`` what that agent takes; one whose sessions
choose among agents says what any of them takes. Driven by the official acp SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, image_block, text_block
from acp.ws import create_websocket_stream

from loopgate.gateway.agents.spec import AgentSpec
from tests.acp.support import RecordingClient, spawned
from tests.attachments.support import PNG_B64
from tests.gateway.harness import running_gateway

LOOPS = "tests.attachments.loops"


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    """``hashing`` takes images and files; ``plain`` text only; ``audio`` audio only."""
    agents = {
        "hashing": AgentSpec(loop=f"{LOOPS}:thread_loop", default=True),
        "plain": AgentSpec(loop=f"{LOOPS}:text_loop"),
        "audio": AgentSpec(loop=f"{LOOPS}:text_loop", accepts=["audio"]),
    }
    with running_gateway(agents=agents) as (base, _):
        yield base.replace("http://", "ws://")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "image", "audio"),
    [
        ("/acp", True, True),  # sessions choose: what any agent takes
        ("/agents/hashing/acp", True, False),
        ("/agents/plain/acp", False, False),
        ("/agents/audio/acp", False, True),
    ],
)
async def test_a_connection_advertises_what_its_agents_take(
    gateway: str, path: str, image: bool, audio: bool
) -> None:
    client = RecordingClient()
    conn = connect_to_agent(client, await create_websocket_stream(gateway + path))
    try:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    finally:
        await conn.close()
    caps = init.agent_capabilities.prompt_capabilities
    assert (caps.image, caps.audio, caps.embedded_context) == (image, audio, True)


@pytest.mark.anyio
async def test_a_connection_for_one_agent_runs_every_session_on_it(gateway: str) -> None:
    client = RecordingClient()
    stream = await create_websocket_stream(gateway + "/agents/plain/acp")
    conn = connect_to_agent(client, stream, observers=[client.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd="/tmp", mcp_servers=[])
        # Nothing to choose: no agent selector, only the approval one.
        assert [o.id for o in session.config_options or []] == ["approval"]
        answer = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
        assert answer.stop_reason == "end_turn"
        # An image sent anyway is refused, naming the kind.
        with pytest.raises(RequestError) as refused:
            await conn.prompt(
                session_id=session.session_id,
                prompt=[text_block("see"), image_block(PNG_B64, "image/png")],
            )
    finally:
        await conn.close()
    assert client.text() == "you said: hi"
    assert refused.value.code == -32602
    assert "does not take image parts" in str(refused.value)


@pytest.mark.anyio
async def test_an_agent_the_gateway_does_not_serve_is_invalid_params(gateway: str) -> None:
    conn = connect_to_agent(
        RecordingClient(), await create_websocket_stream(gateway + "/agents/nobody/acp")
    )
    try:
        with pytest.raises(RequestError) as refused:
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
    finally:
        await conn.close()
    assert refused.value.code == -32602
    assert "nobody" in str(refused.value) and "hashing" in str(refused.value)


@pytest.mark.anyio
async def test_loopgate_acp_agent_flag_advertises_that_agents_kinds(tmp_path: Path) -> None:
    config = tmp_path / "agents.toml"
    config.write_text(
        f'[agents.hashing]\nloop = "{LOOPS}:thread_loop"\ndefault = true\n\n'
        f'[agents.plain]\nloop = "{LOOPS}:text_loop"\n'
    )
    seen: dict[str, bool] = {}
    for flags in (("-c", str(config)), ("-c", str(config), "--agent", "plain")):
        client = RecordingClient()
        async with spawned(client, *flags) as conn:
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        seen[" ".join(flags[2:]) or "all"] = bool(init.agent_capabilities.prompt_capabilities.image)
    assert seen == {"all": True, "--agent plain": False}
