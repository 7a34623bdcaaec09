"""``multitask_strategy`` on the other front ends that start runs, each with its own client and
error shape: JSON-RPC ``run.start`` over HTTP, the Vercel route's ``loopgate`` body, MCP's run
tool (the ``mcp`` SDK's client), ACP's ``session/prompt`` ``_meta.loopgate`` (the ``acp`` SDK
over the WebSocket). The run going on the thread is the scripted "slow tool", started through
the native API (another front end: what ACP's strategies are about).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from acp import RequestError, connect_to_agent, text_block
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient, open_session
from tests.gateway.multitask_support import (
    after_slow,
    ended,
    fresh_thread,
    in_background,
    run_of,
    runs_on,
    slow_run,
)
from tests.mcp.support import http_session

pytestmark = pytest.mark.gateway(scripted_delay_s=0.002, thread_wait_s=3.0)
NOT_ACCEPTED = -32007


# --- JSON-RPC over HTTP ----------------------------------------------------------------------


def rpc_start(http: httpx.Client, thread: str, prompt: str, strategy: str) -> dict[str, Any]:
    params = {"input": prompt, "threadId": thread, "multitaskStrategy": strategy}
    call = {"jsonrpc": "2.0", "id": 1, "method": "run.start", "params": params}
    answer: dict[str, Any] = http.post("/rpc", json=call).json()
    return answer


def test_jsonrpc_reject_enqueue_and_interrupt(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        error = rpc_start(http, thread, "plain hi", "reject")["error"]
        assert error["code"] == NOT_ACCEPTED and error["data"]["runId"] == slow["id"]
        with in_background(lambda: rpc_start(http, thread, "what did i say", "enqueue")) as out:
            assert rpc_start(http, thread, "plain hi", "reject")["error"]["code"] == NOT_ACCEPTED
            assert len(runs_on(http, thread)) == 1  # the queued start is waiting
            http.post(f"/v1/runs/{slow['id']}/cancel")
        queued = run_of(http, out[0]["result"]["runId"])
        assert after_slow(queued, "what did i say")
        assert ended(http, queued["id"])["status"] == "completed"

        slow = slow_run(http, thread)
        interrupting = rpc_start(http, thread, "and now", "interrupt")["result"]
        assert run_of(http, slow["id"])["status"] == "cancelled"
        assert after_slow(run_of(http, interrupting["runId"]), "and now")
        bad = rpc_start(http, thread, "hi", "later")["error"]
        assert bad["code"] == -32602 and bad["data"]["param"] == "multitaskStrategy"


# --- Vercel AI SDK route (the HTTP body the transport's `body` option sends) -----------------


def chat(gateway: str, thread: str, strategy: str) -> tuple[int, str, bytes]:
    body = {
        "id": thread,
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "plain hi"}]}],
        "loopgate": {"multitask_strategy": strategy},
    }
    with httpx.stream("POST", f"{gateway}/vercel", json=body, timeout=30) as response:
        raw = b"".join(response.iter_bytes())
        return response.status_code, response.headers.get("x-loopgate-run-id", ""), raw


def test_vercel_reject_and_enqueue(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        status, _, raw = chat(gateway, thread, "reject")
        assert status == 409 and slow["id"] in json.loads(raw)["detail"]
        with in_background(lambda: chat(gateway, thread, "enqueue")) as out:
            assert chat(gateway, thread, "reject")[0] == 409
            assert len(runs_on(http, thread)) == 1
            http.post(f"/v1/runs/{slow['id']}/cancel")
        status, run_id, raw = out[0]
        assert status == 200 and b'"type":"finish"' in raw
        assert run_of(http, slow["id"])["status"] == "cancelled"
        assert ended(http, run_id)["status"] == "completed"
        status, _, raw = chat(gateway, thread, "later")
        assert status == 422 and b"multitask_strategy" in raw


# --- MCP: the run tool's arguments (the mcp SDK's client over streamable HTTP) ---------------


@pytest.mark.anyio
async def test_mcp_reject_and_enqueue(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        async with http_session(f"{gateway}/mcp") as session:

            async def run(prompt: str, strategy: str) -> Any:
                args = {"prompt": prompt, "thread_id": thread, "multitask_strategy": strategy}
                return await session.call_tool("run", args)

            refused = await run("plain hi", "reject")
            assert refused.is_error and slow["id"] in refused.content[0].text
            results: list[Any] = []
            async with anyio.create_task_group() as group:

                async def enqueue() -> None:
                    results.append(await run("what did i say", "enqueue"))

                group.start_soon(enqueue)
                assert (await run("plain hi", "reject")).is_error
                await anyio.to_thread.run_sync(lambda: http.post(f"/v1/runs/{slow['id']}/cancel"))
            [queued] = results
            assert not queued.is_error
            run_id = queued.meta["loopgate"]["runId"]
            assert after_slow(run_of(http, run_id), "what did i say")
            bad = await run("hi", "later")
            assert bad.is_error and "multitask_strategy" in bad.content[0].text


# --- ACP: session/prompt's _meta.loopgate (the acp SDK over the WebSocket) -------------------


@pytest.mark.anyio
async def test_acp_reject_and_enqueue_against_a_run_from_elsewhere(gateway: str) -> None:
    client = RecordingClient()
    transport = await create_websocket_stream(gateway.replace("http://", "ws://") + "/acp")
    conn = connect_to_agent(client, transport, observers=[client.observe])
    try:
        session = await open_session(conn)
        with httpx.Client(base_url=gateway, timeout=30) as http:
            slow = await anyio.to_thread.run_sync(slow_run, http, session)

            async def prompt(text: str, strategy: str | None) -> Any:
                meta = {} if strategy is None else {"loopgate": {"multitask_strategy": strategy}}
                return await conn.prompt(session_id=session, prompt=[text_block(text)], **meta)

            for strategy in (None, "reject"):  # refusing is what ACP did without one
                with pytest.raises(RequestError) as refused:
                    await prompt("plain hi", strategy)
                assert refused.value.code == -32600
            assert refused.value.data["runId"] == slow["id"]
            answers: list[Any] = []
            async with anyio.create_task_group() as group:

                async def enqueue() -> None:
                    answers.append(await prompt("what did i say", "enqueue"))

                group.start_soon(enqueue)
                await anyio.to_thread.run_sync(lambda: http.post(f"/v1/runs/{slow['id']}/cancel"))
            assert answers[0].stop_reason == "end_turn"
            runs = await anyio.to_thread.run_sync(runs_on, http, session)
            assert [r["status"] for r in runs] == ["completed", "cancelled"]
            assert after_slow(runs[0], "what did i say")
            with pytest.raises(RequestError) as bad:
                await prompt("hi", "later")
            assert bad.value.code == -32602
    finally:
        await conn.close()
