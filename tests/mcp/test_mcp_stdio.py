"""The official ``mcp`` SDK's client drives ``loopgate mcp`` over stdio, as Claude Desktop,
Cursor or VS Code start it."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.mcp.support import (
    REPO,
    TOOL_NAMES,
    Progressed,
    check_live_run_is_its_projection,
    finished,
    get_run,
    loopgate_meta,
    read_events,
    server_params,
    stdio_session,
    structured,
    text,
)
from tests.waiting import until

pytestmark = pytest.mark.anyio


async def test_lists_its_tools_and_resources() -> None:
    async with stdio_session() as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert list(tools) == TOOL_NAMES
        run = tools["run"]
        assert run.input_schema["required"] == ["prompt"]
        assert set(run.input_schema["properties"]) == {
            "prompt",
            "thread_id",
            "attachments",
            "multitask_strategy",
        }
        for tool in tools.values():
            assert tool.description and tool.annotations is not None
            for name, schema in tool.input_schema["properties"].items():
                assert schema.get("description"), (tool.name, name)
        assert tools["get_run"].annotations.read_only_hint is True
        assert tools["cancel_run"].annotations.destructive_hint is True
        templates = (await session.list_resource_templates()).resource_templates
        assert [(t.uri_template, t.mime_type) for t in templates] == [
            ("loopgate://runs/{run_id}/events", "application/x-ndjson")
        ]
        assert (await session.list_resources()).resources == []


async def test_a_run_streams_progress_then_answers() -> None:
    async with stdio_session() as session:
        progressed = Progressed()
        result = await session.call_tool(
            "run", {"prompt": "What time is it?"}, progress_callback=progressed
        )
        assert not result.is_error, text(result)
        answer = text(result)
        assert answer.startswith("Let me look that up.\n\nIt is ") and "(UTC) right now" in answer
        meta = loopgate_meta(result)
        assert meta["status"] == "completed" and meta["runId"] == meta["threadId"]
        messages = progressed.messages
        assert messages[0] == f"run {meta['runId']} started"
        assert "calling tool clock" in messages
        assert any(m.startswith("tool clock answered: ") for m in messages)
        assert "It is" in messages[-2]  # the answer so far, just before the last response
        await check_live_run_is_its_projection(session, result, progressed)

        listed = structured(await session.call_tool("list_runs", {}))["runs"]
        assert [r["id"] for r in listed] == [meta["runId"]]
        described = structured(await session.call_tool("get_run", {"run_id": meta["runId"]}))
        assert described["state"] == "finished" and described["status"] == "completed"
        assert described["events"] == f"loopgate://runs/{meta['runId']}/events"
        assert described["input"] == [{"role": "user", "content": "What time is it?"}]
        resources = (await session.list_resources()).resources
        assert [str(r.uri) for r in resources] == [described["events"]]
        events = await read_events(session, meta["runId"])
        assert [e.seq for e in events] == list(range(1, described["last_seq"] + 1))
        assert events[-1].kind == "completion" and events[-1].data["status"] == "completed"


async def test_without_a_progress_token_only_the_answer_comes() -> None:
    seen: list[object] = []

    async def on_message(message: object) -> None:
        seen.append(message)

    async with (
        stdio_client(server_params()) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        result = await session.call_tool("run", {"prompt": "plain hello"})
    assert "plain hello" in text(result)
    assert not [m for m in seen if isinstance(m, types.ServerNotification)]


async def test_bad_calls_get_errors_that_say_what_was_wrong() -> None:
    async with stdio_session() as session:
        cases = {
            ("run", "{}"): "invalid arguments for run: Object missing required field `prompt`",
            ("run", '{"prompt": 5}'): "invalid arguments for run: Expected `str`, got `int` - "
            "at `prompt`",
            ("run", '{"prompt": ""}'): "invalid arguments for run: Expected `str` of length "
            ">= 1 - at `prompt`",
            ("run", '{"prompt": "hi", "model": "x"}'): "invalid arguments for run: Object "
            "contains unknown field `model`",
            ("list_runs", '{"limit": 0}'): "invalid arguments for list_runs: Expected `int` "
            ">= 1 - at `limit`",
            ("get_run", '{"run_id": "nope"}'): "no run with id 'nope'",
            ("cancel_run", '{"run_id": "nope"}'): "no run with id 'nope'",
        }
        for (tool, arguments), said in cases.items():
            result = await session.call_tool(tool, json.loads(arguments))
            assert result.is_error, (tool, arguments)
            assert text(result) == said
        with pytest.raises(MCPError) as unknown_tool:
            await session.call_tool("delete_everything", {})
        assert unknown_tool.value.code == types.INVALID_PARAMS
        assert "Unknown tool: 'delete_everything'" in unknown_tool.value.message
        for uri, says in {
            "loopgate://runs/nope/events": "no run with id 'nope'",
            "file:///etc/passwd": "is not a run's event log (loopgate://runs/{run_id}/events)",
        }.items():
            with pytest.raises(MCPError) as unknown_resource:
                await session.read_resource(uri)
            assert unknown_resource.value.code == types.INVALID_PARAMS
            assert unknown_resource.value.message.startswith("Resource not found: ")
            assert says in unknown_resource.value.message


async def test_cancel_run_stops_a_slow_run_and_its_call_says_so() -> None:
    async with stdio_session("--scripted-delay", "0.5") as session:
        progressed = Progressed()
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(
                await session.call_tool(
                    "run", {"prompt": "plain tell me a story"}, progress_callback=progressed
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await progressed.until("asking")
            running = structured(await session.call_tool("list_runs", {"limit": 1}))["runs"][0]
            assert running["state"] == "running"
            cancel = await session.call_tool("cancel_run", {"run_id": running["id"]})
            cancelled = structured(cancel)
            assert cancelled["run_id"] == running["id"] and cancelled["accepted"] is True
        [result] = results
        assert result.is_error
        assert text(result).startswith("The run was cancelled.")
        assert loopgate_meta(result)["status"] == "cancelled"
        # Cancelling a finished run is no error: there is nothing left to do.
        again = structured(await session.call_tool("cancel_run", {"run_id": running["id"]}))
        assert again["accepted"] is False


async def test_a_call_the_client_cancels_cancels_its_run() -> None:
    async with stdio_session("--scripted-delay", "0.5") as session:
        progressed = Progressed()
        with anyio.move_on_after(30) as waited:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await session.call_tool(
                        "run", {"prompt": "plain tell me a story"}, progress_callback=progressed
                    )

                tg.start_soon(call)
                await progressed.until("asking")
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the call
        assert not waited.cancelled_caught
        run_id = progressed.messages[0].split()[1]
        with anyio.fail_after(10):
            described = await until(partial(get_run, session, run_id), finished)
        assert described["status"] == "cancelled"


async def test_a_question_is_answered_on_the_same_thread() -> None:
    async with stdio_session() as session:
        asked = await session.call_tool("run", {"prompt": "ask user plan my trip"})
        assert not asked.is_error
        thread = loopgate_meta(asked)["threadId"]
        assert loopgate_meta(asked)["status"] == "waiting_user"
        assert text(asked) == (
            "Before I continue with “ask user plan my trip”: which option do you prefer, A or B?"
            f'\n\n[The run is waiting for an answer: call run again with thread_id "{thread}" '
            "and the answer as the prompt.]"
        )
        answered = await session.call_tool("run", {"prompt": "B", "thread_id": thread})
        assert loopgate_meta(answered)["threadId"] == thread
        assert loopgate_meta(answered)["status"] == "completed"
        assert "you said: B" in text(answered)
        runs = structured(await session.call_tool("list_runs", {"thread_id": thread}))["runs"]
        assert [r["id"] for r in runs] == [
            loopgate_meta(answered)["runId"],
            loopgate_meta(asked)["runId"],
        ]


async def test_the_2026_protocol_through_the_sdk_client() -> None:
    """``mcp.Client`` negotiates the newest protocol (server/discover, no handshake)."""
    async with Client(stdio_client(server_params()), mode="auto") as client:
        progressed = Progressed()
        result = await client.call_tool(
            "run", {"prompt": "one tool: what is 17 times 23"}, progress_callback=progressed
        )
        assert text(result) == "The result of 17 * 23 is 391."
        assert "calling tool calculate: 17 * 23" in progressed.messages


def handshake(client: str) -> list[dict[str, Any]]:
    """The lines a client opens a piped session with: initialize, then initialized."""
    return [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": client, "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def test_piped_requests_are_all_answered_before_it_exits() -> None:
    """``loopgate mcp < requests``: the end of input waits for the calls in flight; lines
    that are no message get JSON-RPC errors, and the protocol alone is on stdout."""
    lines = [
        *handshake("sh"),
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "run",
                "arguments": {"prompt": "one tool: what is 17 times 23"},
                "_meta": {"progressToken": "p"},
            },
        },
    ]
    piped = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    piped += b"not json\n[1, 2]\n" + b'{"jsonrpc": "2.0", "id": 9}\n' + b"x" * 3000 + b"\n"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loopgate",
            "mcp",
            "--scripted-delay",
            "0",
            "--max-line-bytes",
            "2000",
        ],
        input=piped,
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert out[0]["id"] == 0 and out[0]["result"]["serverInfo"]["name"] == "loopgate"
    errors = [m["error"] for m in out if "error" in m]
    assert [(e["code"], e["message"].split(":")[0]) for e in errors] == [
        (-32700, "Parse error"),
        (-32600, "Invalid request"),
        (-32600, "Invalid request"),
        (-32600, "Invalid request"),
    ]
    assert [m["id"] for m in out if "error" in m] == [None, None, 9, None]
    assert "3000 bytes; the limit is 2000" in errors[-1]["message"]
    progress = [m["params"] for m in out if m.get("method") == "notifications/progress"]
    assert progress and {p["progressToken"] for p in progress} == {"p"}
    # The ping that follows a call's progress, which a client whose input ended cannot
    # answer, failed at once: no timeout ran out, and the SDK cancelled nothing of its own.
    assert [m for m in out if m.get("method") == "notifications/cancelled"] == []
    last = out[-1]
    assert last["id"] == 1
    assert last["result"]["content"] == [{"type": "text", "text": "The result of 17 * 23 is 391."}]
    assert b"Traceback" not in done.stderr


async def test_a_client_that_never_answers_the_ping_still_gets_its_result() -> None:
    """The ping between a call's progress and its result waits a bounded time: then the
    server gives it up (notifications/cancelled) and answers the call."""
    lines = [
        *handshake("deaf"),
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "run",
                "arguments": {"prompt": "plain hello"},
                "_meta": {"progressToken": "p"},
            },
        },
    ]
    command = [sys.executable, "-m", "loopgate", "mcp", "--scripted-delay", "0"]
    out: list[dict[str, Any]] = []
    async with await anyio.open_process(command, cwd=REPO) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        buffer = b""
        with anyio.fail_after(30):
            while not out or out[-1].get("id") != 1 or "method" in out[-1]:
                buffer += await proc.stdout.receive()
                *complete, buffer = buffer.split(b"\n")
                out.extend(json.loads(line) for line in complete if line)
        await proc.stdin.aclose()  # the input ends: the process does too
        with anyio.fail_after(30):
            assert await proc.wait() == 0
    [ping] = [m for m in out if m.get("method") == "ping"]
    [given_up] = [m for m in out if m.get("method") == "notifications/cancelled"]
    assert given_up["params"]["requestId"] == ping["id"]
    assert out.index(ping) < out.index(given_up) < len(out) - 1
    assert out[-1]["result"]["isError"] is False
