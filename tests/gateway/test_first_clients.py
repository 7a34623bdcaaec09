"""The first clients of ``/acp`` and ``/mcp`` on a fresh ``loopgate serve``: their SDKs are
imported by the first request (adapters.shared.lazy), and every request that arrives while that
import runs waits for it — none is served a half-imported module (issue 29, item 1: 50 first
``/acp`` clients lost 32 connections that way). Each endpoint's real client: the ACP SDK over
its WebSocket transport, the MCP SDK over streamable HTTP."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from acp import PROTOCOL_VERSION, connect_to_agent
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient
from tests.hostile.support import serve
from tests.mcp.support import http_session

pytestmark = pytest.mark.anyio
CLIENTS = 50


async def acp_initialize(base: str) -> None:
    url = base.replace("http://", "ws://") + "/acp"
    conn = connect_to_agent(RecordingClient(), await create_websocket_stream(url))
    try:
        answer = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    finally:
        await conn.close()
    assert answer.protocol_version == PROTOCOL_VERSION


async def mcp_initialize(base: str) -> None:
    async with http_session(f"{base}/mcp") as session:  # it initializes
        assert (await session.list_tools()).tools


@pytest.mark.parametrize("initialize", [acp_initialize, mcp_initialize], ids=["acp", "mcp"])
async def test_concurrent_first_clients_are_all_answered(
    tmp_path: Path, initialize: Callable[[str], Awaitable[None]]
) -> None:
    with serve(tmp_path) as child:
        answered = 0
        failures: list[str] = []
        ready = anyio.Event()

        async def one() -> None:
            nonlocal answered
            await ready.wait()
            try:
                # The import takes about half a second; a lost connection is never answered.
                with anyio.fail_after(60):
                    await initialize(child.base)
                answered += 1
            except Exception as exc:  # every failure is reported below
                failures.append(repr(exc))

        async with anyio.create_task_group() as clients:
            for _ in range(CLIENTS):
                clients.start_soon(one)
            ready.set()
        log = child.log()
    assert failures == [], f"{len(failures)} of {CLIENTS} lost: {failures[:3]}\n{log[-3000:]}"
    assert answered == CLIENTS
    assert "Traceback" not in log
