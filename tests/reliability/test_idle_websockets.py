"""What idle WebSockets cost a real `loopgate serve`, and that closing them gives it back for
reuse (issue 29, item 9). Memory, not time: bounds with room, the figures in
docs/reliability.md (``python -m benchmarks.ws_idle``)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.hostile.support import rss_mib, serve, still_served
from tests.waiting import wait_until

CONNECTIONS = 500
# Measured 27 KiB each without compression, 62 KiB with it (the default before issue 29).
MAX_KIB_EACH = 45


async def open_idle(port: int, n: int, stack: AsyncExitStack) -> list[ClientConnection]:
    """``n`` clients of the websockets library, as they connect by default (offering
    permessage-deflate), 50 at a time."""
    opened: list[ClientConnection] = []

    async def one() -> None:
        opened.append(await stack.enter_async_context(connect(f"ws://127.0.0.1:{port}/rpc/ws")))

    with anyio.fail_after(120):
        for _ in range(n // 50):
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(one)
    return opened


@pytest.mark.anyio
async def test_idle_websockets_cost_a_bounded_amount_each_and_closing_them_gives_it_back(
    tmp_path: Path,
) -> None:
    with serve(tmp_path) as served:
        pid = served.proc.pid
        # Whatever the endpoint loads on first use is loaded before measuring.
        async with AsyncExitStack() as stack:
            await open_idle(served.port, 50, stack)
        wait_until(lambda: still_served(served.port) == 0, 30, "the warm-up to close")
        before = rss_mib(pid)
        rounds = []
        for _ in range(2):
            async with AsyncExitStack() as stack:
                clients = await open_idle(served.port, CONNECTIONS, stack)
                assert all(
                    c.response is not None and "Sec-WebSocket-Extensions" not in c.response.headers
                    for c in clients
                ), "compression is off unless asked for"
                rounds.append(rss_mib(pid))
            wait_until(lambda: still_served(served.port) == 0, 30, "the clients to close")
    first, second = rounds
    each_kib = (first - before) * 1024 / CONNECTIONS
    assert each_kib < MAX_KIB_EACH, f"{each_kib:.1f} KiB per idle WebSocket"
    # What the first round held is reused by the second, not added to.
    assert second - first < (first - before) / 4, (before, first, second)
