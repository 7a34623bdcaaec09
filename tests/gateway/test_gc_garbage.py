"""No cyclic garbage per request or per run from loopgate's own code.

A reference cycle outlives its request until the cyclic collector's next pass over the
generation it reached, dragging whatever it points at along (an exception's traceback holds
every frame it passed through, their locals, the connection). The server runs here under
uvicorn, in this process, with a raw-socket client; every object the collector finds
unreachable is kept (``gc.DEBUG_SAVEALL``) and counted, but for one cycle that is asyncio's
own: a closed socket transport points at itself through its read callback.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import uvicorn
import websockets

from loopgate.gateway.app import create_app
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio

Request = Callable[[int], Awaitable[None]]


async def roundtrip(port: int, method: str, path: str, body: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n"
    if body:
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    return data


def json_body(response: bytes) -> Any:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


class Served:
    """The server, its port, and when it is done with every request sent so far."""

    def __init__(self, server: uvicorn.Server, port: int) -> None:
        self.server, self.port = server, port
        self.tasks = len(asyncio.all_tasks())  # what a server at rest runs

    async def idle(self) -> None:
        """Until the server has closed every connection and ended every task a request started
        (a run's too): their garbage is made by then."""
        state = self.server.server_state
        with anyio.fail_after(10):
            while state.connections or state.tasks or len(asyncio.all_tasks()) > self.tasks:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        # And a closed transport's connection_lost, a callback the loop runs next, has run.
        await anyio.lowlevel.checkpoint()


@asynccontextmanager
async def serving() -> AsyncIterator[Served]:
    app = create_app(Settings(scripted_delay_s=0, max_runs=10_000))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http="h11"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn has no event for it
                await asyncio.sleep(0.01)
        yield Served(server, sock.getsockname()[1])
    finally:
        server.should_exit = True
        await task


def ours(garbage: list[Any]) -> Counter[str]:
    """The garbage but asyncio's closed transports and what only they reach."""
    ids = {id(o): o for o in garbage}
    theirs: set[int] = set()
    todo = [o for o in garbage if type(o).__name__ == "_SelectorSocketTransport"]
    while todo:
        o = todo.pop()
        if id(o) not in theirs:
            theirs.add(id(o))
            todo += [r for r in gc.get_referents(o) if id(r) in ids]
    return Counter(type(o).__name__ for o in garbage if id(o) not in theirs)


async def garbage_of(served: Served, request: Request, count: int) -> Counter[str]:
    await served.idle()
    gc.collect()
    gc.garbage.clear()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for i in range(count):
            await request(i)
        await served.idle()
        gc.collect()
        return ours(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def started(port: int, body: bytes = b'{"input": "hi"}') -> str:
    run_id: str = json_body(await roundtrip(port, "POST", "/v1/runs", body))["id"]
    return run_id


def requests(port: int, finished: str) -> dict[str, Request]:
    numbers = itertools.count()

    async def sse_history(i: int) -> None:
        assert b"completion" in await roundtrip(port, "GET", f"/v1/runs/{finished}/events")

    async def sse_live(i: int) -> None:
        run_id = await started(port)
        assert b"completion" in await roundtrip(port, "GET", f"/v1/runs/{run_id}/events")

    async def agui(i: int) -> None:
        body = {
            "threadId": f"t{i}",
            "runId": f"agui-{next(numbers)}",
            "messages": [{"id": "m", "role": "user", "content": "hi"}],
        }
        out = await roundtrip(port, "POST", "/agui", json.dumps(body).encode())
        assert b"RUN_FINISHED" in out

    async def ingest_socket(i: int) -> None:
        run_id = await started(port, b'{"source": "ingest"}')
        async with websockets.connect(f"ws://127.0.0.1:{port}/v1/runs/{run_id}/ingest") as ws:
            await ws.send('{"kind": "content_delta", "data": {"delta": "hi"}}')
            await ws.send('{"kind": "completion", "data": {"status": "completed"}}')
            assert "end" in str(await ws.recv())

    return {
        "sse_history": sse_history,
        "sse_live": sse_live,
        "agui": agui,
        "ingest_socket": ingest_socket,
    }


async def test_requests_and_runs_leave_no_cyclic_garbage() -> None:
    async with serving() as served:
        port = served.port
        finished = await started(port)
        # Read to its end: the run is then finished.
        assert b"completion" in await roundtrip(port, "GET", f"/v1/runs/{finished}/events")
        for name, request in requests(port, finished).items():
            for i in range(3):
                await request(i)  # caches, first-use imports
            few = await garbage_of(served, request, 10)
            more = await garbage_of(served, request, 30)
            # Growing with the requests is a cycle per request (or per run).
            assert sum(more.values()) <= sum(few.values()), (name, few, more)
