"""ACP clients on the network name http MCP servers the gateway then connects to: only URLs the
operator allowed (allowed_outbound), refused at session/new before anything is contacted; and
a server that cannot be used reads the same to the client whatever the cause (no port scan)."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.schema import HttpMcpServer
from acp.ws import create_websocket_stream

from loopgate.contracts.outbound import OutboundPolicy, check_outbound_entry
from loopgate.gateway.outbound import outbound_allowed
from loopgate.gateway.settings import Settings, load_settings
from tests.acp.support import RecordingClient
from tests.gateway.harness import free_port, running_gateway

pytestmark = pytest.mark.anyio

TOKEN = "outbound-t0ken-0123456789"


class Listener:
    """A TCP service on 127.0.0.1 that is no MCP server: records each request line, answers
    404."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                conn.settimeout(5)
                head = b""
                try:
                    while b"\r\n\r\n" not in head and (chunk := conn.recv(65536)):
                        head += chunk
                except OSError:
                    pass
                with self._lock:
                    self.requests.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                body = b"not an MCP server"
                conn.sendall(
                    b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\nconnection: close\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def seen(self) -> list[str]:
        with self._lock:
            return list(self.requests)


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    listener._thread.start()
    try:
        yield listener
    finally:
        listener.sock.close()
        listener._thread.join(5)


@asynccontextmanager
async def acp_over_ws(base: str, token: str | None = TOKEN) -> AsyncIterator[Any]:
    headers = {"authorization": f"Bearer {token}"} if token else None
    url = base.replace("http://", "ws://") + "/acp"
    client = RecordingClient()
    conn = connect_to_agent(client, await create_websocket_stream(url, headers=headers))
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn
    finally:
        await conn.close()


def http_server(url: str, name: str = "probe") -> HttpMcpServer:
    return HttpMcpServer(type="http", name=name, url=url, headers=[])


async def prompt_error(conn: Any, url: str) -> str:
    session = (await conn.new_session(cwd="/tmp", mcp_servers=[http_server(url)])).session_id
    with pytest.raises(RequestError) as failed:
        await conn.prompt(session_id=session, prompt=[text_block("hello")])
    return str(failed.value)


async def test_a_network_client_may_name_only_allowed_urls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed = free_port()
    caplog.set_level(logging.WARNING, logger="loopgate.tools")
    with listening() as listener:
        allowed = [f"http://127.0.0.1:{listener.port}/allowed/", f"127.0.0.1:{closed}"]
        with running_gateway(token=TOKEN, allowed_outbound=allowed) as (base, _):
            async with acp_over_ws(base) as conn:
                for url in (
                    f"http://127.0.0.1:{listener.port}/mcp",
                    f"http://127.0.0.1:{listener.port}/allowedx/mcp",
                    f"https://127.0.0.1:{listener.port}/allowed/mcp",
                    f"http://127.0.0.1:{listener.port}@127.0.0.1:{listener.port}/allowed/",
                    f"http://localhost:{listener.port}/allowed/mcp",
                    "http://169.254.169.254/latest/meta-data/",
                ):
                    with pytest.raises(RequestError) as refused:
                        await conn.new_session(cwd="/tmp", mcp_servers=[http_server(url)])
                    assert refused.value.code == -32602, url
                    assert refused.value.data == {"field": "mcpServers[0].url"}
                    assert "allowed_outbound" in str(refused.value)
                    assert str(listener.port) not in str(refused.value)
                assert listener.seen() == []  # nothing was contacted
                # Allowed: contacted (it is no MCP server), and a closed port reads the same.
                open_error = await prompt_error(
                    conn, f"http://127.0.0.1:{listener.port}/allowed/mcp"
                )
                closed_error = await prompt_error(conn, f"http://127.0.0.1:{closed}/mcp")
    seen = listener.seen()
    assert seen and all(line.split()[1] == "/allowed/mcp" for line in seen), seen
    assert open_error == closed_error
    assert "MCP server 'probe' could not be used" in open_error
    assert str(closed) not in closed_error and "connection failed" not in closed_error
    # The operator's log has the cause of each.
    assert f"could not be reached at http://127.0.0.1:{closed}/mcp" in caplog.text


async def test_a_gateway_with_no_credentials_serves_its_own_user_as_before() -> None:
    closed = free_port()
    with running_gateway() as (base, _):
        async with acp_over_ws(base, token=None) as conn:
            url = f"http://127.0.0.1:{closed}/mcp"
            session = await conn.new_session(cwd="/tmp", mcp_servers=[http_server(url)])
    assert session.session_id


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://mcp.example.com/", True),
        ("https://mcp.example.com/tools/x", True),
        ("https://MCP.example.com:443/a", True),
        ("http://mcp.example.com/", False),  # another scheme
        ("https://mcp.example.com:8443/", False),
        ("https://mcp.example.com.evil.test/", False),
        ("https://mcp.example.com@evil.test/", False),
        ("https://evil.test/?https://mcp.example.com/", False),
        ("http://tools.internal/anything", True),
        ("https://tools.internal/anything", True),  # no port named: either scheme's own
        ("http://tools.internal:8080/anything", False),
        ("http://a.b.corp.example/", True),
        ("http://corp.example/", False),  # *.corp.example: below it only
        ("http://api.vendor.test/v1", True),
        ("http://api.vendor.test/v1/mcp", True),
        ("http://api.vendor.test/v10", False),
        ("http://[::1]:9000/", True),
        ("ftp://mcp.example.com/", False),
        ("not a url", False),
        ("http://mcp.example.com:99999/", False),
    ],
)
def test_what_the_list_allows(url: str, allowed: bool) -> None:
    policy = OutboundPolicy(
        allowed=(
            "https://mcp.example.com/",
            "tools.internal",
            "*.corp.example",
            "http://api.vendor.test/v1",
            "[::1]:9000",
        )
    )
    assert policy.allows(url) is allowed
    # "*": any http(s) URL, but never one that hides its host behind a user name.
    assert OutboundPolicy(allowed=("*",)).allows(url) is (
        url.startswith(("http://", "https://")) and "99999" not in url and "@" not in url
    )
    assert OutboundPolicy(unrestricted=True).allows(url)


def test_the_setting() -> None:
    env = {"LOOPGATE_ALLOWED_OUTBOUND": "https://mcp.example.com/, tools.internal:8080"}
    settings = load_settings({**env, "LOOPGATE_TOKEN": TOKEN})
    assert settings.allowed_outbound == ["https://mcp.example.com/", "tools.internal:8080"]
    assert outbound_allowed("http://tools.internal:8080/mcp", settings)
    assert not outbound_allowed("http://tools.internal/mcp", settings)
    # No credential: the machine's own user, who could reach any URL themselves.
    assert outbound_allowed("http://10.0.0.1/", Settings())
    for bad in ("ftp://x/", "https://h/?q=1", "https://u@h/", "h:0", "h/path", ""):
        with pytest.raises(ValueError, match="allowed_outbound"):
            check_outbound_entry(bad)
    with pytest.raises(ValueError, match="allowed_outbound"):
        load_settings({"LOOPGATE_ALLOWED_OUTBOUND": "ftp://files/"})
