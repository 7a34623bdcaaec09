"""ThreadMcpPool: a thread's MCP servers, opened on first use, reused, closed, bounded."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.tools.mcp import McpTools
from loopgate.gateway.tools.mcp_specs import McpOptions, McpServerSpec, ToolSourceError
from loopgate.gateway.tools.pool import ThreadMcpPool
from tests.tools.conftest import CTX

pytestmark = pytest.mark.anyio
OPTIONS = McpOptions(connect_timeout_s=20.0, call_timeout_s=20.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def pool(clock: Clock) -> AsyncIterator[ThreadMcpPool]:
    async with anyio.create_task_group() as tg:
        pool = ThreadMcpPool(OPTIONS, max_threads=2, idle_timeout_s=60.0, clock=clock)
        await pool.start(tg)
        try:
            yield pool
        finally:
            await pool.aclose()


@pytest.fixture
def web(fake_http_url: str) -> McpServerSpec:
    return McpServerSpec.from_url(fake_http_url, name="web")


async def echo(tools: McpTools, text: str) -> Any:
    result = await tools.execute(ToolCall(id="1", name="echo", arguments={"text": text}), CTX)
    return result.content if result.success else result.error


async def closed(tools: list[McpTools]) -> bool:
    with anyio.fail_after(10):
        for one in tools:
            await one.wait_closed()
    return not any(one.connected for one in tools)


async def test_opened_on_first_use_and_reused_while_unchanged(
    pool: ThreadMcpPool, web: McpServerSpec
):
    first = await pool.tools_for("t1", [web])
    assert [t.name for t in first] == ["web"] and first[0].connected
    assert await echo(first[0], "hello") == "hello"
    again = await pool.tools_for("t1", [McpServerSpec.from_url(web.url or "", name="web")])
    assert again[0] is first[0]
    assert pool.threads() == ["t1"]


async def test_concurrent_first_use_opens_one_connection(pool: ThreadMcpPool, web: McpServerSpec):
    got: list[list[McpTools]] = []

    async def use() -> None:
        got.append(await pool.tools_for("t1", [web]))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(use)
    assert len({id(tools[0]) for tools in got}) == 1


async def test_changed_specs_replace_the_connections(pool: ThreadMcpPool, web: McpServerSpec):
    old = await pool.tools_for("t1", [web])
    other = McpServerSpec(name="other", url=web.url, headers={"X-Loopgate-Test": "2"})
    new = await pool.tools_for("t1", [web, other])
    assert await closed(old)
    assert [t.name for t in new] == ["web", "other"] and all(t.connected for t in new)
    assert await pool.tools_for("t1", []) == []
    assert await closed(new)
    assert pool.threads() == []


async def test_a_lost_connection_is_reopened(pool: ThreadMcpPool, web: McpServerSpec):
    old = await pool.tools_for("t1", [web])
    await old[0].aclose()  # as if the server had gone away
    new = await pool.tools_for("t1", [web])
    assert new[0] is not old[0] and await echo(new[0], "back") == "back"


async def test_close_thread(pool: ThreadMcpPool, web: McpServerSpec):
    tools = await pool.tools_for("t1", [web])
    await pool.close_thread("t1")
    assert await closed(tools)
    assert await echo(tools[0], "x") == "MCP server 'web' is not connected"
    assert pool.threads() == []
    await pool.close_thread("t1")  # twice is fine


async def test_least_recently_used_thread_is_closed_first(pool: ThreadMcpPool, web: McpServerSpec):
    a = await pool.tools_for("a", [web])
    b = await pool.tools_for("b", [web])
    await pool.tools_for("a", [web])  # a is now the most recently used
    c = await pool.tools_for("c", [web])
    assert pool.threads() == ["a", "c"]
    assert await closed(b)
    assert a[0].connected and c[0].connected


async def test_idle_threads_expire(pool: ThreadMcpPool, web: McpServerSpec, clock: Clock):
    a = await pool.tools_for("a", [web])
    clock.now += 40
    b = await pool.tools_for("b", [web])
    clock.now += 30  # a idle for 70 s, b for 30 s
    assert await pool.expire_idle() == ["a"]
    assert await closed(a) and b[0].connected
    clock.now += 20
    pool.touch("b")
    clock.now += 50
    assert await pool.expire_idle() == []
    assert pool.threads() == ["b"]


async def test_a_failing_server_fails_the_thread_and_names_itself(
    pool: ThreadMcpPool, web: McpServerSpec, caplog: pytest.LogCaptureFixture
):
    broken = McpServerSpec(name="broken", command="loopgate-no-such-command")
    with pytest.raises(ToolSourceError) as info:
        await pool.tools_for("t1", [web, broken])
    assert info.value.message == (
        "MCP server 'broken' could not be used (the gateway's log says why)"
    )
    assert "command not found: loopgate-no-such-command" in caplog.text
    assert pool.threads() == []
    assert [t.name for t in await pool.tools_for("t1", [web])] == ["web"]


async def test_duplicate_server_names(pool: ThreadMcpPool, web: McpServerSpec):
    with pytest.raises(ValueError, match="two MCP servers are named 'web'"):
        await pool.tools_for("t1", [web, web])


async def test_closing_a_thread_stops_its_stdio_servers(
    pool: ThreadMcpPool, fake_stdio: McpServerSpec
):
    tools = await pool.tools_for("t1", [fake_stdio])
    result = await tools[0].execute(ToolCall(id="1", name="pid"), CTX)
    pid = int(result.content)
    await pool.close_thread("t1")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_aclose_closes_everything_and_refuses_more(web: McpServerSpec):
    async with anyio.create_task_group() as tg:
        pool = ThreadMcpPool(OPTIONS)
        with pytest.raises(RuntimeError, match="start the pool first"):
            await pool.tools_for("t1", [web])
        await pool.start(tg)
        a = await pool.tools_for("a", [web])
        b = await pool.tools_for("b", [web])
        await pool.aclose()
        assert await closed([*a, *b])
        with pytest.raises(ToolSourceError, match="closing"):
            await pool.tools_for("c", [web])
    # The task group ended: the reaper stopped and no owner task was left behind.
