"""MCP servers as tool sources, against real servers: the fake server written with the SDK's own
server API (over stdio and over streamable HTTP) and the npm ``server-everything`` (stdio)."""

from __future__ import annotations

import io
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.reference.types import ToolResult
from loopgate.gateway.tools.mcp import McpTools
from loopgate.gateway.tools.mcp_specs import McpOptions, McpServerSpec, ToolSourceError
from tests.fakes.servers import serve_app
from tests.tools.conftest import CTX, FAKE_SERVER, fake_http_server

pytestmark = pytest.mark.anyio
OPTIONS = McpOptions(connect_timeout_s=20.0, call_timeout_s=20.0)


async def call(tools: McpTools, name: str, /, **args: Any) -> ToolResult:
    return await tools.execute(ToolCall(id="c1", name=name, arguments=args), CTX)


@pytest.fixture(scope="module")
async def fake_over_stdio(fake_stdio: McpServerSpec) -> AsyncIterator[McpTools]:
    async with McpTools.connect(fake_stdio, OPTIONS) as tools:
        yield tools


@pytest.fixture(scope="module")
async def fake_over_http(fake_http_url: str) -> AsyncIterator[McpTools]:
    async with McpTools.connect(McpServerSpec.from_url(fake_http_url, name="fake"), OPTIONS) as t:
        yield t


@pytest.fixture(params=["stdio", "http"])
def fake(request: pytest.FixtureRequest) -> McpTools:
    """The same fake server, one connection per transport, shared by the module's tests."""
    return request.getfixturevalue(f"fake_over_{request.param}")


# --- listing ------------------------------------------------------------------------------------


async def test_tools_are_listed_with_schema_and_description(fake: McpTools):
    specs = {spec.name: spec for spec in fake.specs()}
    assert set(specs) >= {"add", "echo", "read_note", "delete_note", "fail", "slow", "weather"}
    add = specs["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert add.parameters["required"] == ["a", "b"]
    assert {name: p["type"] for name, p in add.parameters["properties"].items()} == {
        "a": "integer",
        "b": "integer",
    }


async def test_kind_and_approval_come_from_annotations(fake: McpTools):
    read = ToolCall(id="1", name="read_note")
    delete = ToolCall(id="2", name="delete_note")
    plain = ToolCall(id="3", name="echo")
    assert fake.kind("read_note") == "read"
    assert fake.concurrency_safe(read) and not fake.needs_approval(read)
    assert fake.kind("delete_note") == "edit"
    assert fake.needs_approval(delete) and not fake.concurrency_safe(delete)
    assert fake.kind("echo") == "other"
    assert not fake.needs_approval(plain) and not fake.concurrency_safe(plain)


# --- calls --------------------------------------------------------------------------------------


async def test_text_content_and_structured_data(fake: McpTools):
    result = await call(fake, "add", a=2, b=40)
    assert result.success and result.error is None
    assert result.content == "42"
    assert result.data == {"result": 42}


async def test_structured_content_becomes_data(fake: McpTools):
    result = await call(fake, "weather", city="Oslo")
    assert result.success
    assert result.data == {"city": "Oslo", "celsius": 21.5, "conditions": "sunny"}
    assert msgspec.json.decode(result.content) == result.data


async def test_non_text_parts_are_described(fake: McpTools):
    result = await call(fake, "picture")
    assert result == ToolResult(success=True, content="a red dot\n[image image/png]")


async def test_is_error_is_a_failure_with_the_text_as_error(fake: McpTools):
    result = await call(fake, "fail", message="the disk is full")
    assert result.success is False
    assert result.error is not None and "the disk is full" in result.error
    missing = await call(fake, "read_note", name="nope")
    assert missing.success is False and "no note named nope" in (missing.error or "")


async def test_invalid_arguments_are_refused_by_the_server(fake: McpTools):
    result = await call(fake, "add", a="many", b=1)
    assert result.success is False
    assert "a" in (result.error or "") and "integer" in (result.error or "")


async def test_an_unlisted_tool_is_not_sent(fake: McpTools):
    assert await call(fake, "rm_rf") == ToolResult(success=False, error="unknown tool 'rm_rf'")


async def test_calls_may_come_from_many_tasks_at_once(fake: McpTools):
    results: dict[int, ToolResult] = {}

    async def one(i: int) -> None:
        results[i] = await call(fake, "echo", text=f"message {i}")

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(one, i)
    assert {i: r.content for i, r in results.items()} == {i: f"message {i}" for i in range(12)}


async def test_http_headers_reach_the_server(fake_http_url: str):
    spec = McpServerSpec.from_url(fake_http_url, name="auth", headers={"X-Loopgate-Test": "yes"})
    async with McpTools.connect(spec, OPTIONS) as tools:
        assert (await call(tools, "header", name="X-Loopgate-Test")).content == "yes"


# --- time limits and failures mid-session ---------------------------------------------------------


async def test_a_call_timeout_fails_the_call_not_the_connection(fake_stdio: McpServerSpec):
    options = McpOptions(connect_timeout_s=20.0, call_timeout_s=0.3)
    async with McpTools.connect(fake_stdio, options) as tools:
        started = time.monotonic()
        result = await call(tools, "slow", seconds=30)
        assert time.monotonic() - started < 5
        assert result == ToolResult(
            success=False, error="MCP server 'fake': slow timed out after 0.3 s"
        )
        assert (await call(tools, "echo", text="still here")).content == "still here"
        assert tools.connected


async def test_a_killed_server_is_not_connected(fake_stdio: McpServerSpec):
    async with McpTools.connect(fake_stdio, OPTIONS) as tools:
        pid = int((await call(tools, "pid")).content)
        os.kill(pid, signal.SIGKILL)
        for _ in range(2):
            result = await call(tools, "echo", text="anyone?")
            assert result == ToolResult(success=False, error="MCP server 'fake' is not connected")
        assert not tools.connected
        assert tools.specs()  # still offered: the model's view does not shift mid-thread


async def test_an_http_server_that_goes_away_is_not_connected():
    with fake_http_server() as (url, proc):
        async with McpTools.connect(McpServerSpec.from_url(url, name="web"), OPTIONS) as tools:
            assert (await call(tools, "echo", text="hi")).content == "hi"
            proc.kill()
            proc.wait(10)
            for _ in range(2):
                result = await call(tools, "echo", text="anyone?")
                assert result == ToolResult(
                    success=False, error="MCP server 'web' is not connected"
                )
            assert not tools.connected


async def test_closing_stops_the_server_process(fake_stdio: McpServerSpec):
    async with McpTools.connect(fake_stdio, OPTIONS) as tools:
        pid = int((await call(tools, "pid")).content)
        assert _alive(pid)
    assert not _alive(pid)
    assert await call(tools, "echo", text="x") == ToolResult(
        success=False, error="MCP server 'fake' is not connected"
    )


async def test_a_chatty_stderr_cannot_hang_the_server(monkeypatch: pytest.MonkeyPatch):
    # 1 MB on stderr before serving: a pipe nobody drains would block the server at 64 KB.
    # Our stderr is a StringIO here (no file descriptor), so the server's goes to /dev/null.
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    script = (
        "import runpy, sys; sys.stderr.write('x' * 1_000_000); sys.stderr.flush();"
        f" sys.argv = [{str(FAKE_SERVER)!r}];"
        f" runpy.run_path({str(FAKE_SERVER)!r}, run_name='__main__')"
    )
    spec = McpServerSpec(name="chatty", command=sys.executable, args=["-c", script])
    async with McpTools.connect(spec, OPTIONS) as tools:
        assert (await call(tools, "add", a=1, b=1)).content == "2"
    assert sys.stderr.getvalue() == ""


# --- the npm reference server -------------------------------------------------------------------


async def test_server_everything_over_stdio(everything: McpServerSpec):
    async with McpTools.connect(everything, OPTIONS) as tools:
        names = {spec.name for spec in tools.specs()}
        assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= names
        echo = next(spec for spec in tools.specs() if spec.name == "echo")
        assert echo.parameters["required"] == ["message"]
        assert tools.kind("echo") == "read"
        assert await call(tools, "echo", message="hi") == ToolResult(
            success=True, content="Echo: hi"
        )
        assert (await call(tools, "get-sum", a=2, b=3)).content == "The sum of 2 and 3 is 5."
        image = await call(tools, "get-tiny-image")
        assert image.success and "[image image/png]" in image.content.splitlines()
        weather = await call(tools, "get-structured-content", location="New York")
        assert weather.success and isinstance(weather.data, dict)
        assert set(weather.data) == {"temperature", "conditions", "humidity"}
        bad = await call(tools, "get-sum", a="two", b=3)
        assert bad.success is False and bad.error


# --- failing to connect -------------------------------------------------------------------------


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def start_error(spec: McpServerSpec, options: McpOptions = OPTIONS) -> str:
    """Why ``spec`` could not be started, as the log says: the error itself reads the same
    whatever the cause (a client naming URLs must not learn which ports are open)."""
    kept = _Kept()
    logger = logging.getLogger("loopgate.tools")
    logger.addHandler(kept)
    try:
        async with anyio.create_task_group() as tg:
            tools = McpTools(spec, options)
            with pytest.raises(ToolSourceError) as info:
                await tools.start(tg)
            await tools.aclose()
    finally:
        logger.removeHandler(kept)
    assert info.value.message == str(info.value)
    assert info.value.message == (
        f"MCP server {spec.name!r} could not be used (the gateway's log says why)"
    )
    return kept.lines[-1]


async def test_command_not_found():
    spec = McpServerSpec(name="fs", command="loopgate-no-such-command", args=["--flag"])
    assert await start_error(spec) == (
        "MCP server 'fs' could not be started: command not found: loopgate-no-such-command"
    )


async def test_working_directory_not_found(tmp_path):
    spec = McpServerSpec(name="fs", command=sys.executable, cwd=str(tmp_path / "gone"))
    assert await start_error(spec) == (
        f"MCP server 'fs' could not be started: working directory not found: {tmp_path / 'gone'}"
    )


async def test_server_that_exits_during_start():
    spec = McpServerSpec(name="quitter", command=sys.executable, args=["-c", "print('bye')"])
    assert await start_error(spec) == "MCP server 'quitter' exited during start"


async def test_server_that_never_answers_initialize():
    # Reads its stdin and never writes: exits only when we close its stdin.
    spec = McpServerSpec(
        name="mute", command=sys.executable, args=["-c", "import sys; sys.stdin.read()"]
    )
    started = time.monotonic()
    message = await start_error(spec, McpOptions(connect_timeout_s=0.5))
    assert message == "MCP server 'mute' did not answer initialize within 0.5 s"
    assert time.monotonic() - started < 3.0


async def test_http_url_with_nothing_listening():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        assert await start_error(McpServerSpec.from_url(url, name="web")) == (
            f"MCP server 'web' could not be reached at {url} (connection failed)"
        )


@pytest.fixture
def broken_http() -> Iterator[str]:
    async def fail(request: Request) -> PlainTextResponse:
        return PlainTextResponse("stack trace: secret", status_code=500)

    app = Starlette(routes=[Route("/mcp", fail, methods=["GET", "POST", "DELETE"])])
    with serve_app(app) as base:
        yield f"{base}/mcp"


async def test_http_server_answering_500(broken_http: str):
    message = await start_error(McpServerSpec.from_url(broken_http, name="web"))
    assert message == "MCP server 'web' answered initialize with an error (code -32603)"
    assert "secret" not in message


async def test_start_twice_is_a_programming_error(fake_stdio: McpServerSpec):
    tools = McpTools(McpServerSpec(name="x", command="loopgate-no-such-command"))
    async with anyio.create_task_group() as tg:
        with pytest.raises(ToolSourceError):
            await tools.start(tg)
        with pytest.raises(RuntimeError, match="already started"):
            await tools.start(tg)
    await McpTools(fake_stdio).aclose()  # never started: nothing to wait for


# --- server specs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "name", "command", "args"),
    [
        ("npx -y @modelcontextprotocol/server-everything", "server-everything", "npx", ["-y", "@modelcontextprotocol/server-everything"]),  # noqa: E501
        ("uvx mcp-server-fetch@1.2 --ignore-robots", "mcp-server-fetch", "uvx", ["mcp-server-fetch@1.2", "--ignore-robots"]),  # noqa: E501
        ("python3 'my tools/server.py' --root /tmp", "server", "python3", ["my tools/server.py", "--root", "/tmp"]),  # noqa: E501
        ("/usr/local/bin/mcp-fs /srv", "mcp-fs", "/usr/local/bin/mcp-fs", ["/srv"]),
    ],
)  # fmt: skip
def test_from_command(line: str, name: str, command: str, args: list[str]):
    assert McpServerSpec.from_command(line) == McpServerSpec(name=name, command=command, args=args)


def test_from_command_and_url_take_a_name():
    assert McpServerSpec.from_command("srv", name="mine").name == "mine"
    spec = McpServerSpec.from_url("https://mcp.example.com/mcp", headers={"Authorization": "x"})
    assert spec == McpServerSpec(
        name="mcp.example.com", url="https://mcp.example.com/mcp", headers={"Authorization": "x"}
    )
    assert spec.transport == "http"


def test_from_acp_stdio_and_http():
    stdio = McpServerSpec.from_acp(
        {
            "name": "fs",
            "command": "/bin/mcp-fs",
            "args": ["--root", "/w"],
            "env": [{"name": "TOKEN", "value": "t"}],
        }
    )
    assert stdio == McpServerSpec(
        name="fs", command="/bin/mcp-fs", args=["--root", "/w"], env={"TOKEN": "t"}
    )
    assert stdio.transport == "stdio"
    http = McpServerSpec.from_acp(
        {
            "type": "http",
            "name": "web",
            "url": "http://127.0.0.1:9/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer x"}],
        }
    )
    assert http == McpServerSpec(
        name="web", url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer x"}
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"type": "sse", "name": "old", "url": "http://x/sse", "headers": []}, "sse MCP servers are not supported"),  # noqa: E501
        ({"type": "ws", "name": "w"}, "unknown transport type 'ws'"),
        ({"command": "x", "args": []}, "needs a name"),
        ({"name": "a", "command": "x", "args": "--flag"}, "args must be a list of strings"),
        ({"name": "a", "command": "x", "env": {"K": "V"}}, r"env must be a list of \{name, value\}"),  # noqa: E501
        ({"name": "a", "args": []}, "command must be a string"),
        ({"type": "http", "name": "h", "url": "ftp://x"}, "not an http"),
        ({"type": "http", "name": "h", "url": "http://x", "headers": [{"name": "A"}]}, "headers must be"),  # noqa: E501
        (["not", "an", "object"], "must be an object"),
    ],
)  # fmt: skip
def test_from_acp_rejects(entry: Any, message: str):
    with pytest.raises(ValueError, match=message):
        McpServerSpec.from_acp(entry)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "a"}, "either a command or a url"),
        ({"name": "a", "command": "x", "url": "http://x"}, "either a command or a url"),
        ({"name": "a", "url": "http://x", "env": {"K": "V"}}, "need a command"),
        ({"name": "a", "command": "x", "headers": {"K": "V"}}, "headers need a url"),
        ({"name": "", "command": "x"}, "needs a name"),
    ],
)
def test_spec_checks_itself_also_when_decoded(fields: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        McpServerSpec(**fields)
    with pytest.raises(msgspec.ValidationError, match=message):
        msgspec.json.decode(msgspec.json.encode(fields), type=McpServerSpec)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
