"""The stdio front ends (``loopgate rpc``, ``loopgate acp``) take the same three plugs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import acp
import pytest

from tests.acp.support import RecordingClient, agent_env, open_session, spawned
from tests.fakes.servers import serve_app
from tests.jsonrpc.jsonrpc_support import RpcProcess
from tests.plugs.plugs import SAMPLE, stdio_command
from tests.plugs.sample_http import sample_app
from tests.plugs.sample_loop import script_for

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def loop_url() -> Iterator[str]:
    with serve_app(sample_app()) as base:
        yield base + "/loop"


def plug_args(plug: str, loop_url: str) -> tuple[str, ...]:
    return {
        "python": ("--loop", SAMPLE),
        "http": ("--loop-url", loop_url),
        "stdio": ("--loop-cmd", stdio_command()),
    }[plug]


@pytest.mark.parametrize("plug", ["python", "http", "stdio"])
def test_loopgate_rpc_serves_a_plugged_loop(plug: str, loop_url: str) -> None:
    with RpcProcess(*plug_args(plug, loop_url)) as rpc:
        reply, _ = rpc.call("run.start", {"input": "tool now", "subscribe": True})
        assert "result" in reply, reply
        events: list[dict[str, Any]] = []
        while (message := rpc.recv())["method"] != "run.end":
            events.append(message["params"]["event"])
        assert message["params"]["status"] == "completed"
        assert rpc.finish() == 0
    assert [{"kind": e["kind"], "data": e["data"]} for e in events] == script_for("tool now")


@pytest.mark.parametrize("plug", ["python", "http", "stdio"])
async def test_loopgate_acp_serves_a_plugged_loop(plug: str, loop_url: str) -> None:
    client = RecordingClient(permission="allow_always")
    async with spawned(client, *plug_args(plug, loop_url), env=agent_env()) as conn:
        session = await open_session(conn)
        answer = await conn.prompt(session_id=session, prompt=[acp.text_block("tool please")])
        asked = await conn.prompt(session_id=session, prompt=[acp.text_block("ask first")])
    assert answer.stop_reason == asked.stop_reason == "end_turn"
    assert client.text() == "the answer is 42decision: allow_always"
    assert [r["toolCall"]["toolCallId"] for r in client.permission_requests] == ["call_w"]
    client.check_all_updates()
