"""A streaming session's bounds, driven in process through the stdio transport's serve_lines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from loopgate.adapters.jsonrpc.dispatch import Dispatcher
from loopgate.adapters.jsonrpc.limits import RpcLimits
from loopgate.adapters.jsonrpc.stdio import LineTooLong, read_lines, serve_lines
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with build_hub(Settings(scripted_delay_s=0.001)) as hub:
        yield hub


class Peer:
    """The client end of an in-process line connection."""

    def __init__(self) -> None:
        self.to_server, self._incoming = anyio.create_memory_object_stream[bytes](100)
        self._outgoing, self.from_server = anyio.create_memory_object_stream[bytes](1000)
        self.buffer = b""

    async def read(self, size: int) -> bytes:
        try:
            return await self._incoming.receive()
        except anyio.EndOfStream:
            return b""

    async def write(self, data: bytes) -> None:
        await self._outgoing.send(data)

    async def send(self, message: Any) -> None:
        await self.to_server.send(json.dumps(message).encode() + b"\n")

    async def recv(self) -> Any:
        with anyio.fail_after(10):
            while b"\n" not in self.buffer:
                self.buffer += await self.from_server.receive()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    async def call(self, rid: int, method: str, params: Any) -> Any:
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            message = await self.recv()
            if message.get("id") == rid and "method" not in message:
                return message


async def test_subscriptions_per_connection_are_bounded(hub: Hub) -> None:
    peer = Peer()
    dispatcher = Dispatcher(hub, RpcLimits(max_subscriptions=2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_lines, dispatcher, peer.read, peer.write)
        run_id = (await peer.call(1, "run.start", {"input": "forever"}))["result"]["runId"]
        for rid in (2, 3):
            assert "result" in await peer.call(rid, "run.subscribe", [run_id])
        refused = await peer.call(4, "run.subscribe", [run_id])
        assert refused["error"]["code"] == -32002
        assert "maximum of 2 subscriptions" in refused["error"]["data"]["detail"]
        refused = await peer.call(5, "run.start", {"input": "plain", "subscribe": True})
        assert refused["error"]["code"] == -32002
        assert len(await hub.list_runs()) == 1  # nothing was started for the refused call
        assert (await peer.call(6, "run.unsubscribe", ["sub_1"]))["result"] is True
        assert "result" in await peer.call(7, "run.subscribe", [run_id])
        await hub.cancel(run_id)
        peer.to_server.close()
    assert (await hub.get(run_id)).subscribers == 0


async def test_two_subscriptions_to_one_run_ask_each_question_once(hub: Hub) -> None:
    peer = Peer()
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_lines, Dispatcher(hub, RpcLimits()), peer.read, peer.write)
        started = await peer.call(
            1,
            "run.start",
            {
                "input": "What time is it, and what is 6 * 7?",
                "approval": "always",
                "subscribe": True,
            },
        )
        run_id = started["result"]["runId"]
        await peer.call(2, "run.subscribe", [run_id])
        asked, requests, ends = [], [], 0
        while ends < 2:
            message = await peer.recv()
            if message.get("method") == "run.permission":
                asked.append(message["params"]["requestId"])
                await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": "allow_once"})
            elif message.get("method") == "run.event":
                event = message["params"]["event"]
                if event["kind"] == "permission_request":
                    requests.append(event["data"]["requestId"])
            ends += message.get("method") == "run.end"
        assert len(requests) == 4  # two questions, seen by both subscriptions
        assert sorted(asked) == sorted(set(requests))  # ... each asked once
        assert (await hub.get(run_id)).status == "completed"
        peer.to_server.close()


async def test_a_client_that_stops_reading_is_disconnected(hub: Hub) -> None:
    peer = Peer()

    async def stuck(data: bytes) -> None:
        await anyio.sleep_forever()

    dispatcher = Dispatcher(hub, RpcLimits(write_timeout_s=0.2))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_lines, dispatcher, peer.read, stuck)
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "run.list"})
    # serve_lines returned on its own although the input never ended


async def test_read_lines_bounds_and_skips() -> None:
    chunks = [b"ab", b"c\n" + b"x" * 10, b"y" * 10, b"\nok\n\n", b"tail"]

    async def read(size: int) -> bytes:
        return chunks.pop(0) if chunks else b""

    got = [line async for line in read_lines(read, limit=8)]
    assert got[0] == b"abc"
    assert isinstance(got[1], LineTooLong) and got[1].size == 20
    assert got[2:] == [b"ok", b"", b"tail"]
