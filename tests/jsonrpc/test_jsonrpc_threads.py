"""``run.start`` on a thread that has runs continues it (issue 19, item 4): a client sends only
the new prompt, or the answer to an ``ask_user``; a running thread is -32007 with ``reject``
(by default the start waits its turn)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.jsonrpc.jsonrpc_support import RpcSocket, events_of, rpc_connect

pytestmark = pytest.mark.anyio


def answer_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")


async def run_on(rpc: RpcSocket, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Start a run subscribed from its first event; its id and its events up to the end."""
    started = await rpc.result("run.start", {**params, "subscribe": True})
    return started["runId"], events_of(await rpc.until_end(started["subscription"]))


async def post_rpc(gateway: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        response = await http.post("/rpc", json=message)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_run_start_with_a_prompt_continues_the_thread(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        _, first = await run_on(rpc, {"input": "plain call me Grace", "threadId": "rpc-t"})
        said = answer_of(first)
        run_id, recalled = await run_on(rpc, {"input": "What did I say?", "threadId": "rpc-t"})
        assert answer_of(recalled) == "Before this you said: “plain call me Grace”."
        run = await rpc.result("run.get", {"runId": run_id})
        assert run["input"] == [
            {"role": "user", "content": "plain call me Grace"},
            {"role": "assistant", "content": said},
            {"role": "user", "content": "What did I say?"},
        ]

    # Over plain HTTP too: POST /rpc continues the thread where the WebSocket left it.
    started = await post_rpc(gateway, "run.start", {"input": "what did i say", "threadId": "rpc-t"})
    got = await post_rpc(gateway, "run.get", {"runId": started["result"]["runId"]})
    assert [m["role"] for m in got["result"]["input"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


async def test_ask_user_answered_by_the_next_run_start(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        _, asked = await run_on(rpc, {"input": "ask user: tea or coffee?", "threadId": "rpc-ask"})
        assert asked[-1]["data"]["status"] == "waiting_user"
        call_id = asked[-1]["data"]["toolCallId"]
        run_id, done = await run_on(rpc, {"input": "coffee", "threadId": "rpc-ask"})
        assert done[-1]["data"]["status"] == "completed"
        assert answer_of(done) == "Thanks — you said: coffee. Continuing with that."
        run = await rpc.result("run.get", {"runId": run_id})
        assert [m["role"] for m in run["input"]] == ["user", "assistant", "tool"]
        assert run["input"][-1] == {
            "role": "tool",
            "content": "coffee",
            "tool_call_id": call_id,  # messages keep their own (OpenAI) names
            "name": "ask_user",
        }


async def test_a_running_thread_refuses_run_start(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        slow = await rpc.result("run.start", {"input": "slow tool", "threadId": "rpc-busy"})
        busy = {"input": "plain", "threadId": "rpc-busy", "multitaskStrategy": "reject"}
        refused = await post_rpc(gateway, "run.start", busy)
        error = refused["error"]
        assert error["code"] == -32007 and error["message"] == "Not accepted"
        assert error["data"]["threadId"] == "rpc-busy"
        assert error["data"]["runId"] == slow["runId"]
        assert "still going" in error["data"]["detail"]
        listed = await rpc.result("run.list", {"threadId": "rpc-busy"})
        assert [r["id"] for r in listed["runs"]] == [slow["runId"]]
        await rpc.result("run.cancel", {"runId": slow["runId"]})
        subscribed = await rpc.result("run.subscribe", {"runId": slow["runId"]})
        ended = await rpc.until_end(subscribed["subscription"])
        assert ended[-1]["params"]["status"] == "cancelled"
        _, after = await run_on(rpc, {"input": "plain again", "threadId": "rpc-busy"})
        assert after[-1]["data"]["status"] == "completed"


async def test_a_message_list_is_taken_as_sent(gateway: str) -> None:
    async with rpc_connect(gateway) as ws:
        rpc = RpcSocket(ws)
        await run_on(rpc, {"input": "plain one", "threadId": "rpc-list"})
        sent = [{"role": "user", "content": "only this"}]
        run_id, _ = await run_on(rpc, {"input": sent, "threadId": "rpc-list"})
        assert (await rpc.result("run.get", {"runId": run_id}))["input"] == sent
