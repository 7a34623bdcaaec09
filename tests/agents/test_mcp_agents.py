"""MCP on a gateway serving two agents, driven by the official ``mcp`` SDK's client over
streamable HTTP (``/mcp`` of a real gateway) and stdio (``loopgate mcp -c FILE``): one tool per
agent, named after it and described by its config; ``run`` with an ``agent`` to choose; an
unknown agent or tool in MCP's own error shapes."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, types
from mcp.shared.exceptions import MCPError

from loopgate.gateway.agents.spec import AgentSpec
from tests.agents.roster import PREFIX, two_agent_settings, write_two_agents
from tests.gateway.harness import free_port, running_gateway
from tests.mcp.support import (
    TOOL_NAMES,
    Progressed,
    check_live_run_is_its_projection,
    http_session,
    loopgate_meta,
    run_end,
    stdio_session,
    structured,
    text,
)

# The gateway is paced, so that a run waiting in the scripted model's slow tool is still
# going when its call is cancelled.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.gateway(
        agents=two_agent_settings(scripted_delay_s=0.01).agents, scripted_delay_s=0.01
    ),
]
AGENT_TOOLS = [*TOOL_NAMES, "coder", "parrot"]
DESCRIPTIONS = {"coder": "Writes and explains code", "parrot": "Repeats what you say"}
UNKNOWN = "no agent named 'nobody'; this gateway serves: coder, parrot"


async def check_tools(session: ClientSession) -> dict[str, types.Tool]:
    """Two agent tools after the four, each described by its agent's config; ``run`` names
    the agents it may run."""
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert list(tools) == AGENT_TOOLS
    for name, description in DESCRIPTIONS.items():
        tool = tools[name]
        assert tool.description == description
        assert tool.title == name
        assert tool.input_schema == tools["run"].input_schema | {
            "properties": {
                k: v for k, v in tools["run"].input_schema["properties"].items() if k != "agent"
            }
        }
        assert tool.meta == {"loopgate": {"agent": name}}
        assert tool.annotations is not None and tool.annotations.read_only_hint is False
    agent = tools["run"].input_schema["properties"]["agent"]
    assert agent["enum"] == ["coder", "parrot"]
    assert "coder, the default" in agent["description"]
    assert tools["run"].input_schema["required"] == ["prompt"]
    return tools


async def check_each_agent_answers(session: ClientSession) -> dict[str, str]:
    """Each agent's tool runs that agent, and says so; returns the run id of each."""
    progressed = Progressed()
    parrot = await session.call_tool(
        "parrot", {"prompt": "hello there"}, progress_callback=progressed
    )
    assert not parrot.is_error, text(parrot)
    assert text(parrot) == PREFIX + "hello there"
    assert loopgate_meta(parrot)["agent"] == "parrot"
    assert progressed.messages[0] == f"run {loopgate_meta(parrot)['runId']} started"
    coder = await session.call_tool("coder", {"prompt": "What time is it?"})
    assert not coder.is_error, text(coder)
    assert "(UTC) right now" in text(coder)
    assert loopgate_meta(coder)["agent"] == "coder"
    ids = {"parrot": loopgate_meta(parrot)["runId"], "coder": loopgate_meta(coder)["runId"]}
    for agent, run_id in ids.items():
        described = structured(await session.call_tool("get_run", {"run_id": run_id}))
        assert described["agent"] == agent
        assert described["metadata"]["mcp"]["tool"] == agent
    return ids


async def test_each_agent_is_a_tool_over_http(gateway: str) -> None:
    async with http_session(f"{gateway}/mcp") as session:
        await check_tools(session)
        await check_each_agent_answers(session)
        # What the client got is the projection of the run's log, as for `run`; the meta
        # names the agent besides.
        progressed = Progressed()
        result = await session.call_tool(
            "parrot", {"prompt": "once more"}, progress_callback=progressed
        )
        meta = loopgate_meta(result)
        assert meta.pop("agent") == "parrot"
        await check_live_run_is_its_projection(session, result, progressed)


async def test_run_takes_an_agent_else_the_default_or_the_threads(gateway: str) -> None:
    async with http_session(f"{gateway}/mcp") as session:
        picked = await session.call_tool("run", {"prompt": "hi", "agent": "parrot"})
        assert text(picked) == PREFIX + "hi"
        assert loopgate_meta(picked)["agent"] == "parrot"
        plain = await session.call_tool("run", {"prompt": "plain hello"})
        assert loopgate_meta(plain)["agent"] == "coder"
        assert "plain hello" in text(plain) and not text(plain).startswith(PREFIX)
        # A thread stays with its agent: `run` on a parrot thread is parrot's.
        thread = loopgate_meta(picked)["threadId"]
        more = await session.call_tool("run", {"prompt": "again", "thread_id": thread})
        assert loopgate_meta(more)["agent"] == "parrot"
        assert loopgate_meta(more)["threadId"] == thread
        assert text(more).startswith(PREFIX)
        described = structured(
            await session.call_tool("get_run", {"run_id": loopgate_meta(more)["runId"]})
        )
        assert described["metadata"]["mcp"]["tool"] == "run"


async def test_an_unknown_agent_or_tool_is_told_in_mcps_shapes(gateway: str) -> None:
    async with http_session(f"{gateway}/mcp") as session:
        # An argument the caller's model can correct: a tool error that names the agents.
        refused = await session.call_tool("run", {"prompt": "hi", "agent": "nobody"})
        assert refused.is_error and text(refused) == UNKNOWN
        wrong = await session.call_tool("parrot", {"prompt": "hi", "agent": "coder"})
        assert wrong.is_error
        assert text(wrong) == "invalid arguments for parrot: Object contains unknown field `agent`"
        # A tool nobody serves: the protocol's error.
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("nobody", {"prompt": "hi"})
        assert unknown.value.code == types.INVALID_PARAMS
        assert unknown.value.message == "Unknown tool: 'nobody'; tools/list lists the tools"


async def test_cancelling_an_agent_tools_call_cancels_its_run(gateway: str) -> None:
    """An agent's own tool is cancelled as `run` is: the SDK's notifications/cancelled names
    the call, whose run has the id the session derives for it."""
    async with http_session(f"{gateway}/mcp") as session:
        progressed = Progressed()
        async with anyio.create_task_group() as tg:
            call = partial(session.call_tool, progress_callback=progressed)
            tg.start_soon(call, "coder", {"prompt": "slow tool, then cancel the call"})
            await progressed.until("calling tool sleep")
            tg.cancel_scope.cancel()
        run_id = progressed.messages[0].split()[1]
        end, _ = await run_end(gateway, run_id, within=10)
        assert end.data["status"] == "cancelled"


async def test_loopgate_mcp_takes_the_config_file(tmp_path: Path) -> None:
    """``loopgate mcp -c FILE``: the agents of the file, in this process, on stdio."""
    async with stdio_session("-c", str(write_two_agents(tmp_path))) as session:
        await check_tools(session)
        await check_each_agent_answers(session)
        refused = await session.call_tool("run", {"prompt": "hi", "agent": "nobody"})
        assert refused.is_error and text(refused) == UNKNOWN


async def test_one_declared_agent_keeps_the_four_tools() -> None:
    solo = {"solo": AgentSpec(description="The only one")}
    with running_gateway(agents=solo) as (base, _):
        async with http_session(f"{base}/mcp") as session:
            assert [t.name for t in (await session.list_tools()).tools] == TOOL_NAMES
            result = await session.call_tool("run", {"prompt": "plain hello"})
            assert "agent" not in loopgate_meta(result)
            refused = await session.call_tool("run", {"prompt": "hi", "agent": "solo"})
            assert refused.is_error
            assert text(refused) == (
                "invalid arguments for run: Object contains unknown field `agent`"
            )


async def test_the_tools_follow_the_gateways_agents(tmp_path: Path) -> None:
    """The tools are listed per request: ``loopgate mcp --server`` lists what the gateway
    serves now, here one restarted on the same port with another roster."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    renamed = {
        "coder": AgentSpec(description="Writes and explains code", default=True),
        "echo": AgentSpec(description="Says it back", loop="tests.agents.parrot:loop"),
    }
    async with stdio_session("--server", url) as session:

        async def listed() -> list[str]:
            return [t.name for t in (await session.list_tools()).tools]

        with running_gateway(port=port, agents=two_agent_settings().agents):
            assert await listed() == AGENT_TOOLS
        with running_gateway(port=port, agents=renamed):
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert list(tools) == [*TOOL_NAMES, "coder", "echo"]
            assert tools["echo"].description == "Says it back"
            echoed = await session.call_tool("echo", {"prompt": "hi"})
            assert text(echoed) == PREFIX + "hi"
            with pytest.raises(MCPError) as gone:
                await session.call_tool("parrot", {"prompt": "hi"})
            assert gone.value.code == types.INVALID_PARAMS
        with running_gateway(port=port):
            assert await listed() == TOOL_NAMES
