"""ToolSources: configured tools for every run plus each thread's MCP servers."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.reference.tools import DemoTools
from loopgate.gateway.tools import FunctionTools
from loopgate.gateway.tools.mcp_specs import McpOptions, McpServerSpec, ToolSourceError
from loopgate.gateway.tools.sources import CONFIGURED, ToolSources
from tests.tools.conftest import CTX, fake_http_server

pytestmark = pytest.mark.anyio
OPTIONS = McpOptions(connect_timeout_s=20.0)


def shout(text: str) -> str:
    """Shout."""
    return text.upper()


async def test_fixed_tools_and_a_threads_own_servers(tmp_path: Path, fake_http_url: str):
    web = McpServerSpec.from_url(fake_http_url, name="web")
    sources = ToolSources([DemoTools(tmp_path), FunctionTools([shout])], [], OPTIONS)
    await sources.start()
    try:
        plain = await sources.for_thread("t0", [])
        assert "shout" in {s.name for s in plain.specs()}
        assert "add" not in {s.name for s in plain.specs()}
        assert sources.pool.threads() == []

        box = await sources.for_thread("t1", [web])
        result = await box.execute(ToolCall(id="1", name="add", arguments={"a": 1, "b": 2}), CTX)
        assert result.content == "3"
        assert (await sources.for_thread("t1", [web])).source_of("add") is box.source_of("add")
        assert sources.pool.threads() == ["t1"]
        await sources.close_thread("t1")
        assert sources.pool.threads() == []
    finally:
        await sources.aclose()


async def test_configured_servers_are_shared_by_every_thread(fake_http_url: str):
    configured = McpServerSpec.from_url(fake_http_url, name="configured")
    sources = ToolSources([], [configured], OPTIONS)
    await sources.start()
    try:
        assert sources.pool.threads() == [CONFIGURED]  # connected at start
        one, two = await sources.for_thread("t1", []), await sources.for_thread("t2", [])
        assert one.source_of("add") is two.source_of("add")
        mine = McpServerSpec.from_url(fake_http_url, name="mine")
        with pytest.raises(ValueError, match="defined by both MCP server 'configured' and"):
            await sources.for_thread("t3", [mine])
        await sources.close_thread(CONFIGURED)  # not a thread: nothing happens
        assert CONFIGURED in sources.pool.threads()
    finally:
        await sources.aclose()


async def test_a_configured_server_that_is_down_fails_the_runs_that_need_it(
    caplog: pytest.LogCaptureFixture,
):
    with fake_http_server() as (url, proc):
        pass  # the port is free again: nothing listens there now
    spec = McpServerSpec.from_url(url, name="later")
    sources = ToolSources([], [spec], McpOptions(connect_timeout_s=2.0))
    with caplog.at_level(logging.ERROR, logger="loopgate.tools"):
        await sources.start()  # does not raise: the gateway starts anyway
    try:
        assert "MCP server 'later'" in caplog.text and "runs that need it" in caplog.text
        with pytest.raises(ToolSourceError, match="MCP server 'later'"):
            await sources.for_thread("t1", [])
    finally:
        await sources.aclose()
    assert proc.returncode is not None


async def test_duplicate_configured_names():
    spec = McpServerSpec(name="same", command="x")
    with pytest.raises(ValueError, match="two MCP servers are named 'same'"):
        ToolSources([], [spec, spec])
