"""The official ``mcp`` SDK's client on ``/mcp`` (streamable HTTP) of a real gateway (uvicorn on
127.0.0.1): tools, progress, resources, cancellation, the token and the Origin check."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.harness import running_gateway
from tests.mcp.support import (
    TOOL_NAMES,
    Progressed,
    check_live_run_is_its_projection,
    finished,
    get_run,
    http_session,
    loopgate_meta,
    read_events,
    run_end,
    stdio_session,
    structured,
    text,
)
from tests.waiting import until

# The gateway's deltas paced as a model streams them; the runs a test acts on while they go
# wait in the scripted model's 30-second `sleep` tool ("slow tool"), however loaded the host.
pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.01)]
ACCEPT = {"accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}


async def test_tools_progress_answer_and_the_run_record(gateway: str) -> None:
    async with http_session(f"{gateway}/mcp") as session:
        tools = (await session.list_tools()).tools
        assert [t.name for t in tools] == TOOL_NAMES
        progressed = Progressed()
        result = await session.call_tool(
            "run", {"prompt": "What time is it?"}, progress_callback=progressed
        )
        assert not result.is_error, text(result)
        assert "It is" in text(result) and "(UTC) right now" in text(result)
        assert "calling tool clock" in progressed.messages
        await check_live_run_is_its_projection(session, result, progressed)
        run_id = loopgate_meta(result)["runId"]
        described = structured(await session.call_tool("get_run", {"run_id": run_id}))
        assert described["status"] == "completed"
        listed = structured(await session.call_tool("list_runs", {"limit": 100}))["runs"]
        assert run_id in [r["id"] for r in listed]
        resources = {str(r.uri): r for r in (await session.list_resources()).resources}
        mine = resources[f"loopgate://runs/{run_id}/events"]
        assert mine.mime_type == "application/x-ndjson"
        assert mine.description is not None and "asked: What time is it?" in mine.description
        events = await read_events(session, run_id)
        assert len(events) == described["last_seq"]


async def test_cancel_run_on_a_slow_run(gateway: str) -> None:
    async with http_session(f"{gateway}/mcp") as session:
        progressed = Progressed()
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(
                await session.call_tool(
                    "run", {"prompt": "slow tool please"}, progress_callback=progressed
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await progressed.until("calling tool sleep")
            run_id = progressed.messages[0].split()[1]
            running = structured(await session.call_tool("get_run", {"run_id": run_id}))
            assert running["state"] == "running"
            cancel = structured(await session.call_tool("cancel_run", {"run_id": run_id}))
            assert cancel["accepted"] is True
        [result] = results
        assert result.is_error and text(result).startswith("The run was cancelled.")
        await check_live_run_is_its_projection(session, result, progressed)


async def cancel_a_slow_call(call_tool: Callable[..., Awaitable[Any]]) -> str:
    """Calls `run` with the slow tool and, once its sleep has started, cancels the caller's
    scope, as an SDK's user does; returns the run's id (from its first progress message)."""
    progressed = Progressed()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            partial(
                call_tool,
                "run",
                {"prompt": "slow tool, then cancel the call"},
                progress_callback=progressed,
            )
        )
        await progressed.until("calling tool sleep")
        tg.cancel_scope.cancel()
    return progressed.messages[0].split()[1]


async def test_cancelling_a_call_cancels_its_run(gateway: str) -> None:
    """The SDK's ClientSession cancels a call when its caller's scope is cancelled: it POSTs
    notifications/cancelled on its own and keeps the call's stream open."""
    async with http_session(f"{gateway}/mcp") as session:
        run_id = await cancel_a_slow_call(session.call_tool)
        end, took = await run_end(gateway, run_id, within=10)
        assert end.data["status"] == "cancelled"
        print(f"run cancelled {took:.3f} s after the call was")
        # The session goes on, and its next call is answered as ever.
        result = await session.call_tool("run", {"prompt": "plain hello"})
        assert not result.is_error and "plain hello" in text(result)


async def test_cancelling_a_call_of_the_2026_protocol_cancels_its_run(gateway: str) -> None:
    """At 2026-07-28 the SDK cancels a call over HTTP by closing its stream (no session)."""
    async with Client(streamable_http_client(f"{gateway}/mcp"), mode="auto") as client:
        run_id = await cancel_a_slow_call(client.call_tool)
        end, took = await run_end(gateway, run_id, within=10)
        assert end.data["status"] == "cancelled"
        print(f"run cancelled {took:.3f} s after the call was")


async def test_a_client_that_hangs_up_cancels_its_run(gateway: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "run",
            "arguments": {"prompt": "slow tool, then hang up"},
            "_meta": {"progressToken": 1},
        },
    }
    async with (
        httpx.AsyncClient() as http,
        http.stream("POST", f"{gateway}/mcp", json=body, headers=ACCEPT) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        messages: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                messages.append(json.loads(line[6:])["params"]["message"])
                if messages[-1].startswith("calling tool sleep"):
                    break
        run_id = messages[0].split()[1]
        running = (await http.get(f"{gateway}/v1/runs/{run_id}")).json()
        assert running["state"] == "running"
    async with http_session(f"{gateway}/mcp") as session:
        with anyio.fail_after(10):
            described = await until(partial(get_run, session, run_id), finished)
    assert described["status"] == "cancelled"


async def test_the_2026_protocol_and_bad_calls(gateway: str) -> None:
    async with Client(streamable_http_client(f"{gateway}/mcp"), mode="auto") as client:
        result = await client.call_tool("run", {"prompt": "one tool: what is 17 times 23"})
        assert text(result) == "The result of 17 * 23 is 391."
        bad = await client.call_tool("run", {"thread_id": "t"})
        assert bad.is_error
        assert text(bad) == "invalid arguments for run: Object missing required field `prompt`"
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("loopgate://runs/nope/events")
        assert unknown.value.code == types.INVALID_PARAMS


def test_the_endpoint_is_stateless_and_guarded(gateway: str) -> None:
    url = f"{gateway}/mcp"
    answered = httpx.post(url, json=INITIALIZE, headers=ACCEPT)
    assert answered.status_code == 200
    # A session id for the client to send back (its cancellations need one), kept nowhere:
    # any instance takes it, and every other request is served with or without one.
    session = answered.headers["mcp-session-id"]
    again = httpx.post(url, json=INITIALIZE, headers=ACCEPT)
    assert len(session) >= 32 and again.headers["mcp-session-id"] != session
    listed = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**ACCEPT, "mcp-session-id": "a-session-no-instance-has-seen"},
    )
    assert listed.status_code == 200 and "mcp-session-id" not in listed.headers
    for method in ("GET", "DELETE"):  # no stream to open, no session to end
        refused = httpx.request(method, url, headers={"accept": "text/event-stream"})
        assert refused.status_code == 405, method
    foreign = httpx.post(url, json=INITIALIZE, headers={**ACCEPT, "origin": "https://evil.example"})
    assert foreign.status_code == 403
    assert "cross-origin request from https://evil.example refused" in foreign.text
    local = httpx.post(url, json=INITIALIZE, headers={**ACCEPT, "origin": "http://127.0.0.1:3000"})
    assert local.status_code == 200


async def test_a_token_guards_it() -> None:
    with running_gateway(token="s3cret-token-01234") as (base, _):
        async with httpx.AsyncClient() as http:
            refused = await http.post(f"{base}/mcp", json=INITIALIZE, headers=ACCEPT)
        assert refused.status_code == 401
        headers = {"authorization": "Bearer s3cret-token-01234"}
        async with http_session(f"{base}/mcp", headers=headers) as session:
            result = await session.call_tool("run", {"prompt": "plain hello"})
        assert not result.is_error and "plain hello" in text(result)


async def test_loopgate_mcp_on_stdio_can_serve_a_running_gateways_runs(gateway: str) -> None:
    """``loopgate mcp --server URL``: the stdio server is a front end of another gateway."""
    async with stdio_session("--server", gateway) as session:
        progressed = Progressed()
        result = await session.call_tool(
            "run", {"prompt": "one tool: what is 17 times 23"}, progress_callback=progressed
        )
        assert text(result) == "The result of 17 * 23 is 391."
        await check_live_run_is_its_projection(session, result, progressed)
    run_id = loopgate_meta(result)["runId"]
    async with httpx.AsyncClient() as http:
        record = (await http.get(f"{gateway}/v1/runs/{run_id}")).json()
    assert record["status"] == "completed"
    assert record["metadata"]["mcp"]["tool"] == "run"
