"""docs/jsonrpc.md works as written: every ```jsonrpc block is replayed over one WebSocket.

``-->`` lines are sent as they are. ``<--`` lines are awaited: a response by its id (result or
error as shown, the same error code, the same result keys), a server request (``run.permission``)
by its id, ``run.end`` by its subscription; other notifications are not awaited.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from tests.gateway.harness import REPO, running_gateway
from tests.jsonrpc.jsonrpc_support import RpcSocket, rpc_connect

pytestmark = pytest.mark.anyio
DOC = REPO / "docs" / "jsonrpc.md"


def transcript() -> list[tuple[str, Any]]:
    blocks = re.findall(r"```jsonrpc\n(.*?)```", DOC.read_text(), flags=re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    out = []
    for line in lines:
        direction, _, body = line.partition(" ")
        assert direction in ("-->", "<--"), line
        out.append((direction, json.loads(body)))
    return out


def is_response(message: Any) -> bool:
    return isinstance(message, list) or "method" not in message


def same_shape(expected: Any, actual: Any) -> None:
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), actual
        for e, a in zip(expected, actual, strict=True):
            same_shape(e, a)
        return
    assert actual["id"] == expected["id"]
    if "error" in expected:
        assert actual.get("error", {}).get("code") == expected["error"]["code"], actual
        assert set(actual["error"]["data"]) == set(expected["error"]["data"]), actual
    else:
        assert "result" in actual, actual
        result, shown = actual["result"], expected["result"]
        if isinstance(shown, dict):
            assert set(result) == set(shown), (sorted(result), sorted(shown))
        else:
            assert result == shown


async def test_the_documented_session_runs_as_written() -> None:
    steps = transcript()
    assert len(steps) > 30
    with running_gateway(scripted_delay_s=0.001) as (base, _server):
        async with rpc_connect(base) as ws:
            rpc = RpcSocket(ws)
            received: list[Any] = []

            async def wait_for(match: Any) -> Any:
                with anyio.fail_after(15):
                    while True:
                        for message in received:
                            if match(message):
                                received.remove(message)
                                return message
                        received.append(await rpc.recv())

            for direction, message in steps:
                if direction == "-->":
                    await rpc.send(message)
                elif is_response(message):
                    first_id = (message[0] if isinstance(message, list) else message)["id"]

                    def response(m: Any, rid: Any = first_id, batch: bool = False) -> bool:
                        head = m[0] if isinstance(m, list) and m else m
                        return is_response(m) and isinstance(head, dict) and head["id"] == rid

                    same_shape(message, await wait_for(response))
                elif "id" in message:
                    got = await wait_for(
                        lambda m, e=message: (
                            isinstance(m, dict)
                            and m.get("method") == e["method"]
                            and m.get("id") == e["id"]
                        )
                    )
                    assert set(got["params"]) == set(message["params"])
                    assert (
                        got["params"]["toolCall"]["name"] == message["params"]["toolCall"]["name"]
                    )
                elif message["method"] == "run.end":
                    got = await wait_for(
                        lambda m, e=message: (
                            isinstance(m, dict)
                            and m.get("method") == "run.end"
                            and m["params"]["subscription"] == e["params"]["subscription"]
                        )
                    )
                    assert got["params"]["status"] == message["params"]["status"]
