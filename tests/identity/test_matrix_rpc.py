"""Ownership on the RPC front ends, driven by their real clients (docs/auth.md).

One gateway with keys for alice (tenant acme, run), bob (globex, run), root (admin) and viewer
(acme, read). alice starts a run or a session on each front end; bob's every attempt at it
(see, list, attach, resume, cancel, steer, answer, continue) is answered exactly as an id that
never existed is, in that protocol's shape; root sees and controls everything; viewer cannot
start anything and sees only its own (nothing).

JSON-RPC: ``jsonrpcclient`` over ``httpx`` (POST /rpc) and ``websockets`` (GET /rpc/ws). ACP: the
``acp`` Python SDK over WebSocket (the key in the Authorization header, and as ``?token=``), and
the TypeScript SDK's session/list. MCP: the ``mcp`` SDK's ClientSession over streamable HTTP,
and plain ``httpx`` for a thief holding alice's ``Mcp-Session-Id``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import anyio
import httpx
import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.ws import create_websocket_stream
from jsonrpcclient import Error, Ok, parse, request
from mcp import ClientSession, types
from mcp.shared.exceptions import MCPError
from websockets.asyncio.client import connect

from loopgate.adapters.mcp.sessions import run_id_for
from tests.acp.support import RecordingClient
from tests.gateway.harness import REPO, running_gateway
from tests.identity.principals import TestKey as Key
from tests.identity.principals import write_test_keys
from tests.jsonrpc.jsonrpc_support import RpcSocket, rpc_connect
from tests.mcp.support import Progressed, http_session, loopgate_meta, structured, text
from tests.node_clients import NODE_DIR, node_clients
from tests.waiting import until

pytestmark = pytest.mark.anyio

# An id no run, thread or session ever had: what bob gets for alice's must read the same.
NEVER = "run_0123456789abcdef0123456789abcdef"
NEVER_SESSION = "sess_0123456789abcdef0123456789abcdef"
SLOW = "slow tool please"  # the scripted model's 30 s sleep: the run is live while we poke it
ACCEPT = {"accept": "application/json, text/event-stream"}


class World(NamedTuple):
    base: str
    keys: dict[str, Key]

    def key(self, name: str) -> Key:
        return self.keys[name]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    keys_file = tmp_path_factory.mktemp("identity") / "keys.json"
    keys = write_test_keys(keys_file)
    workspace = str(tmp_path_factory.mktemp("workspace"))
    with running_gateway(keys_file=str(keys_file), scripted_delay_s=0.002, workspace=workspace) as (
        base,
        _,
    ):
        yield World(base, keys)


def same_answer(theirs: Any, never: Any, their_id: str, never_id: str = NEVER) -> None:
    """Two answers that differ in nothing but the id they name."""
    assert json.dumps(theirs).replace(their_id, "<id>") == json.dumps(never).replace(
        never_id, "<id>"
    ), (theirs, never)


async def native_run(world: World, run_id: str) -> dict[str, Any]:
    """The run as the admin sees it on the native API (the judge of what really happened)."""
    async with httpx.AsyncClient(base_url=world.base, headers=world.key("root").headers) as http:
        got = await http.get(f"/v1/runs/{run_id}")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


async def subscribers(world: World, run_id: str, count: int, within: float = 10) -> None:
    """Until the run has ``count`` subscribers (a client's leaving is seen by the gateway a
    moment after the client closed)."""
    with anyio.fail_after(within):
        # The hub has no event for it: its count is what says.
        await until(lambda: native_run(world, run_id), lambda run: run["subscribers"] == count)


async def finished(world: World, run_id: str, within: float = 10) -> dict[str, Any]:
    """The run once it has ended, read from its native SSE stream (which ends with it)."""
    with anyio.fail_after(within):
        async with (
            httpx.AsyncClient(timeout=within, headers=world.key("root").headers) as http,
            http.stream("GET", f"{world.base}/v1/runs/{run_id}/events") as response,
        ):
            assert response.status_code == 200
            async for _ in response.aiter_lines():
                pass
    return await native_run(world, run_id)


# --- JSON-RPC over HTTP -----------------------------------------------------------------


def rpc(http: httpx.Client, who: Key, method: str, params: Any = None) -> Ok | Error:
    response = http.post("/rpc", json=request(method, params=params), headers=who.headers)
    assert response.status_code == 200, response.text
    parsed = parse(response.json())
    assert isinstance(parsed, Ok | Error)
    return parsed


def error(answer: Ok | Error) -> dict[str, Any]:
    assert isinstance(answer, Error), answer
    return {"code": answer.code, "message": answer.message, "data": answer.data}


def ok(answer: Ok | Error) -> Any:
    assert isinstance(answer, Ok), answer
    return answer.result


def test_jsonrpc_over_http(world: World) -> None:
    alice, bob, root, viewer = (world.key(n) for n in ("alice", "bob", "root", "viewer"))
    with httpx.Client(base_url=world.base, timeout=10) as http:
        started = ok(rpc(http, alice, "run.start", {"input": SLOW}))
        run_id, thread_id = started["runId"], started["threadId"]
        mine = ok(rpc(http, alice, "run.get", {"runId": run_id}))
        assert mine["owner"] == {"subject": "alice", "tenant": "acme"}
        assert [r["id"] for r in ok(rpc(http, alice, "run.list"))["runs"]] == [run_id]

        # bob: every method on alice's run answers as for a run that never existed.
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("run.get", {}),
            ("run.events", {"after": 0}),
            ("run.cancel", {}),
            ("run.steer", {"content": "stop that"}),
            ("run.respond", {"requestId": "perm_1", "decision": "allow_once"}),
        ]
        for method, params in attempts:
            theirs = error(rpc(http, bob, method, {"runId": run_id, **params}))
            never = error(rpc(http, bob, method, {"runId": NEVER, **params}))
            assert theirs["code"] == -32000, (method, theirs)
            same_answer(theirs, never, run_id)
            # The reader of alice's own tenant is another subject: not its run either.
            read_only = error(rpc(http, viewer, method, {"runId": run_id, **params}))
            same_answer(read_only, never, run_id)
        assert ok(rpc(http, bob, "run.list"))["runs"] == []
        assert ok(rpc(http, bob, "run.list", {"threadId": thread_id}))["runs"] == []
        # Continuing alice's thread: not found (a thread id nobody used starts a new thread).
        cont = error(rpc(http, bob, "run.start", {"input": "more", "threadId": thread_id}))
        assert cont["code"] == -32000
        assert cont["data"] == {"detail": f"no thread with id {thread_id!r}", "threadId": thread_id}
        still = ok(rpc(http, alice, "run.list", {"threadId": thread_id}))["runs"]
        assert [r["id"] for r in still] == [run_id]

        # viewer: may not start; sees only its own, which is nothing.
        refused = error(rpc(http, viewer, "run.start", {"input": "hi"}))
        assert refused["code"] == -32010 and refused["message"] == "Forbidden"
        assert "run scope" in refused["data"]["detail"]
        assert ok(rpc(http, viewer, "run.list"))["runs"] == []

        # root sees and controls alice's run.
        assert ok(rpc(http, root, "run.get", {"runId": run_id}))["owner"]["subject"] == "alice"
        assert run_id in [r["id"] for r in ok(rpc(http, root, "run.list"))["runs"]]
        assert ok(rpc(http, root, "run.events", {"runId": run_id}))["events"]
        assert ok(rpc(http, root, "run.cancel", {"runId": run_id}))["accepted"] is True
    assert anyio.run(finished, world, run_id)["status"] == "cancelled"


# --- JSON-RPC over WebSocket ------------------------------------------------------------


async def test_jsonrpc_over_websocket(world: World) -> None:
    alice, bob, root = world.key("alice"), world.key("bob"), world.key("root")
    async with (
        rpc_connect(world.base, additional_headers=alice.headers) as alice_ws,
        rpc_connect(world.base, additional_headers=bob.headers) as bob_ws,
    ):
        a, b = RpcSocket(alice_ws), RpcSocket(bob_ws)
        started = await a.result("run.start", {"input": SLOW, "subscribe": True})
        run_id, thread_id = started["runId"], started["threadId"]
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("run.subscribe", {"after": 0}),
            ("run.get", {}),
            ("run.events", {}),
            ("run.cancel", {}),
            ("run.steer", {"content": "stop that"}),
            ("run.respond", {"requestId": "perm_1", "decision": "reject_once"}),
        ]
        for method, params in attempts:
            theirs = await b.call(method, {"runId": run_id, **params})
            never = await b.call(method, {"runId": NEVER, **params})
            assert theirs["error"]["code"] == -32000, (method, theirs)
            same_answer(
                {**theirs, "id": None}, {**never, "id": None}, run_id
            )  # ids differ per call
        assert (await b.result("run.list", {"threadId": thread_id}))["runs"] == []
        # bob's socket got nothing of alice's run: its next answer is the next thing it reads.
        assert (await b.result("run.list"))["runs"] == []
        assert b.inbox == []
        # alice's subscription is still live; root attaches to it too, and cancels it.
        async with rpc_connect(world.base, additional_headers=root.headers) as root_ws:
            r = RpcSocket(root_ws)
            watched = await r.result("run.subscribe", {"runId": run_id})
            assert (await r.result("run.cancel", {"runId": run_id}))["accepted"] is True
            end = (await r.until_end(watched["subscription"]))[-1]["params"]
        assert end["status"] == "cancelled"
        mine = (await a.until_end(started["subscription"]))[-1]["params"]
        assert mine["status"] == "cancelled"


async def test_jsonrpc_websocket_takes_the_key_as_a_query_token(world: World) -> None:
    alice = world.key("alice")
    url = f"{world.base.replace('http://', 'ws://')}/rpc/ws?token={alice.key}"
    async with connect(url) as ws:
        started = await RpcSocket(ws).result("run.start", {"input": "plain hello"})
    assert (await native_run(world, started["runId"]))["owner"]["subject"] == "alice"


# --- ACP over WebSocket -----------------------------------------------------------------


@asynccontextmanager
async def acp_client(
    world: World, who: Key, client: RecordingClient | None = None, *, query: bool = False
) -> AsyncIterator[Any]:
    url = world.base.replace("http://", "ws://") + "/acp"
    if query:
        transport = await create_websocket_stream(f"{url}?token={who.key}")
    else:
        transport = await create_websocket_stream(url, headers=who.headers)
    recording = client or RecordingClient()
    conn = connect_to_agent(recording, transport, observers=[recording.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn
    finally:
        await conn.close()


async def refused(call: Any) -> dict[str, Any]:
    with pytest.raises(RequestError) as caught:
        await call
    return caught.value.to_error_obj()


async def test_acp_sessions_are_their_owners(world: World) -> None:
    alice, bob, root, viewer = (world.key(n) for n in ("alice", "bob", "root", "viewer"))
    async with acp_client(world, alice, query=True) as conn:
        session = (await conn.new_session(cwd="/alice", mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=session, prompt=[text_block("plain from alice")])
        assert answer.stop_reason == "end_turn"
        listed = [s.session_id for s in (await conn.list_sessions(cwd="/alice")).sessions]
        assert listed == [session]
        empty = (await conn.new_session(cwd="/alice", mcp_servers=[])).session_id

    async with acp_client(world, bob) as conn:
        assert (await conn.list_sessions()).sessions == []
        assert (await conn.list_sessions(cwd="/alice")).sessions == []
        for sid in (session, empty):  # one with runs, one recorded before its first prompt
            calls = {
                "session/load": lambda s: conn.load_session(
                    cwd="/bob", session_id=s, mcp_servers=[]
                ),
                "session/resume": lambda s: conn.resume_session(
                    cwd="/bob", session_id=s, mcp_servers=[]
                ),
                "session/prompt": lambda s: conn.prompt(
                    session_id=s, prompt=[text_block("plain from bob")]
                ),
                "session/set_config_option": lambda s: conn.set_config_option(
                    config_id="approval", session_id=s, value="always"
                ),
                "session/close": lambda s: conn.close_session(session_id=s),
            }
            for method, call in calls.items():
                theirs = await refused(call(sid))
                never = await refused(call(NEVER_SESSION))
                assert theirs["code"] == -32002, (method, theirs)
                same_answer(theirs, never, sid, NEVER_SESSION)
        # None of it touched alice's session: bob's prompt started no run on it.
        mine = [s.session_id for s in (await conn.list_sessions()).sessions]
        assert mine == []

    async with acp_client(world, viewer) as conn:
        no = await refused(conn.new_session(cwd="/viewer", mcp_servers=[]))
        assert no["code"] == -32010 and no["message"].startswith("Forbidden: ")
        assert "run scope" in no["message"]
        assert (await conn.list_sessions()).sessions == []
        same_answer(
            await refused(conn.load_session(cwd="/v", session_id=session, mcp_servers=[])),
            await refused(conn.load_session(cwd="/v", session_id=NEVER_SESSION, mcp_servers=[])),
            session,
            NEVER_SESSION,
        )

    loaded = RecordingClient()
    async with acp_client(world, root, loaded) as conn:
        everyone = [s.session_id for s in (await conn.list_sessions(cwd="/alice")).sessions]
        assert session in everyone and empty in everyone
        await conn.load_session(cwd="/alice", session_id=session, mcp_servers=[])
    assert loaded.text() and loaded.kinds()[0] == "user_message_chunk"

    # alice still has her session as she left it.
    async with acp_client(world, alice) as conn:
        listed = {s.session_id for s in (await conn.list_sessions(cwd="/alice")).sessions}
        assert listed == {session, empty}
        await conn.close_session(session_id=empty)


async def test_acp_a_live_prompt_is_out_of_anyone_elses_reach(world: World) -> None:
    """alice's prompt is running; bob's session/cancel of it does nothing (a notification: no
    answer either way), his load is not found; root's load attaches to it and alice's own
    cancel ends it."""
    alice, bob, root = world.key("alice"), world.key("bob"), world.key("root")
    client = RecordingClient()
    sleeping = anyio.Event()

    async def on_update(update: Any) -> None:
        if getattr(update, "session_update", None) == "tool_call":
            sleeping.set()

    client.on_update = on_update
    answers: dict[str, Any] = {}
    async with acp_client(world, alice, client) as conn:
        session = (await conn.new_session(cwd="/live", mcp_servers=[])).session_id

        async def prompt() -> None:
            answers["alice"] = await conn.prompt(session_id=session, prompt=[text_block(SLOW)])

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            with anyio.fail_after(10):
                await sleeping.wait()
            async with httpx.AsyncClient(base_url=world.base, headers=alice.headers) as http:
                runs = (await http.get("/v1/runs", params={"thread_id": session})).json()["runs"]
            run_id = runs[0]["id"]
            async with acp_client(world, bob) as thief:
                await thief.cancel(session_id=session)
                # Answered after the cancel was handled: the connection handles in order.
                assert (await thief.list_sessions()).sessions == []
                theirs = await refused(
                    thief.load_session(cwd="/live", session_id=session, mcp_servers=[])
                )
                assert theirs["code"] == -32002
            assert (await native_run(world, run_id))["state"] == "running"
            watcher = RecordingClient()
            async with acp_client(world, root, watcher) as admin:
                await admin.load_session(cwd="/live", session_id=session, mcp_servers=[])
            # The admin only watched: its leaving stops nothing. Its connection is done once
            # its subscription is (that closes after the agent's shutdown).
            await subscribers(world, run_id, 1)
            assert (await native_run(world, run_id))["state"] == "running"
            await conn.cancel(session_id=session)
    assert answers["alice"].stop_reason == "cancelled"
    assert (await finished(world, run_id))["status"] == "cancelled"


def test_acp_session_list_with_the_typescript_sdk(world: World) -> None:
    """@agentclientprotocol/sdk over the gateway's WebSocket: each key lists its own."""
    node = node_clients()
    driver = NODE_DIR / "acp-ws-list.mjs"
    url = world.base.replace("http://", "ws://") + "/acp"

    def drive(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [node, str(driver), url, *args],
            cwd=REPO,
            env=dict(os.environ),
            capture_output=True,
            timeout=60,
        )
        lines = done.stdout.decode().strip().splitlines()
        assert done.returncode == 0 and lines, done.stderr.decode()[-2000:]
        summary: dict[str, Any] = json.loads(lines[-1])
        return summary

    alice, bob, root = world.key("alice"), world.key("bob"), world.key("root")
    made = drive(alice.key, "new", "/node-alice")
    session = made["sessionId"]
    assert session in drive(alice.key, "list", "/node-alice")["sessions"]
    assert drive(bob.key, "list", "/node-alice")["sessions"] == []
    assert session in drive(root.key, "list", "/node-alice")["sessions"]
    assert drive(bob.key, "load", session)["error"]["code"] == -32002


# --- MCP over streamable HTTP -----------------------------------------------------------


@asynccontextmanager
async def mcp_session(world: World, who: Key) -> AsyncIterator[ClientSession]:
    async with http_session(f"{world.base}/mcp", headers=who.headers) as session:
        yield session


async def read_refused(session: ClientSession, run_id: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as caught:
        await session.read_resource(f"loopgate://runs/{run_id}/events")
    return {"code": caught.value.code, "message": caught.value.message, "data": caught.value.data}


def listed_runs(resources: types.ListResourcesResult) -> list[str]:
    return [str(r.uri).split("/")[3] for r in resources.resources]


async def test_mcp_tools_and_resources_per_caller(world: World) -> None:
    alice, bob, root, viewer = (world.key(n) for n in ("alice", "bob", "root", "viewer"))
    async with mcp_session(world, alice) as session:
        result = await session.call_tool("run", {"prompt": "plain from alice over mcp"})
        assert not result.is_error, text(result)
        run_id, thread_id = loopgate_meta(result)["runId"], loopgate_meta(result)["threadId"]
        assert run_id in listed_runs(await session.list_resources())
        described = structured(await session.call_tool("get_run", {"run_id": run_id}))
        assert described["owner"] == {"subject": "alice", "tenant": "acme"}

    async with mcp_session(world, bob) as session:
        assert run_id not in listed_runs(await session.list_resources())
        assert listed_runs(await session.list_resources()) == []
        theirs = await read_refused(session, run_id)
        assert theirs["code"] == types.INVALID_PARAMS
        same_answer(theirs, await read_refused(session, NEVER), run_id)
        for tool in ("get_run", "cancel_run"):
            mine = await session.call_tool(tool, {"run_id": run_id})
            never = await session.call_tool(tool, {"run_id": NEVER})
            assert mine.is_error and never.is_error
            same_answer(text(mine), text(never), run_id)
        assert structured(await session.call_tool("list_runs", {}))["runs"] == []
        in_thread = await session.call_tool("list_runs", {"thread_id": thread_id})
        assert structured(in_thread)["runs"] == []
        cont = await session.call_tool("run", {"prompt": "more", "thread_id": thread_id})
        assert cont.is_error and text(cont) == f"no thread with id {thread_id!r}"
        own = await session.call_tool("run", {"prompt": "plain from bob"})
        assert not own.is_error
        assert listed_runs(await session.list_resources()) == [loopgate_meta(own)["runId"]]

    async with mcp_session(world, viewer) as session:
        no = await session.call_tool("run", {"prompt": "plain from the viewer"})
        assert no.is_error and "run scope" in text(no)
        assert listed_runs(await session.list_resources()) == []
        same_answer(await read_refused(session, run_id), await read_refused(session, NEVER), run_id)

    async with mcp_session(world, root) as session:
        everyone = listed_runs(await session.list_resources())
        assert run_id in everyone and loopgate_meta(own)["runId"] in everyone
        read = await session.read_resource(f"loopgate://runs/{run_id}/events")
        assert isinstance(read.contents[0], types.TextResourceContents)
        assert read.contents[0].text.count("\n") == described["last_seq"]


class Overheard:
    """What alice's MCP client sends and gets, as an httpx event hook sees it: her session id
    and the JSON-RPC id of her ``run`` call (what a thief would need to name her run)."""

    def __init__(self) -> None:
        self.session: str | None = None
        self.run_call: str | int | None = None

    async def request(self, req: Any) -> None:
        body = json.loads(req.content or b"null")
        if (
            isinstance(body, dict)
            and body.get("method") == "tools/call"
            and body["params"]["name"] == "run"
        ):
            self.run_call = body["id"]

    async def response(self, resp: Any) -> None:
        self.session = resp.headers.get("mcp-session-id") or self.session


async def test_mcp_a_stolen_session_id_cannot_cancel_alices_run(world: World) -> None:
    """bob presents alice's Mcp-Session-Id and names her call in notifications/cancelled: the
    run service refuses the cancel (not his run), and her call goes on. alice's own is taken."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    alice, bob = world.key("alice"), world.key("bob")
    heard = Overheard()
    progressed = Progressed()
    results: list[types.CallToolResult] = []
    async with create_mcp_http_client(headers=alice.headers) as http:
        http.event_hooks = {"request": [heard.request], "response": [heard.response]}
        async with (
            streamable_http_client(f"{world.base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def call() -> None:
                results.append(
                    await session.call_tool("run", {"prompt": SLOW}, progress_callback=progressed)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                with anyio.fail_after(10):
                    await progressed.until("calling tool sleep")
                assert heard.session is not None and heard.run_call is not None
                run_id = run_id_for(heard.session, heard.run_call)
                assert progressed.messages[0].split()[1] == run_id
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": heard.run_call, "reason": "not yours"},
                }
                stolen = {**ACCEPT, **bob.headers, "mcp-session-id": heard.session}
                async with httpx.AsyncClient(base_url=world.base, timeout=10) as thief:
                    sent = await thief.post("/mcp", json=cancel, headers=stolen)
                    # Taken like any notification; the cancel was decided before this answer.
                    assert sent.status_code == 202, sent.text
                    assert (await native_run(world, run_id))["state"] == "running"
                    # With no key at all it never reaches the endpoint.
                    anonymous = {**ACCEPT, "mcp-session-id": heard.session}
                    nobody = await thief.post("/mcp", json=cancel, headers=anonymous)
                    assert nobody.status_code == 401
                assert (await native_run(world, run_id))["state"] == "running"
                assert not results  # her call is still going
                # alice cancels her own: the call ends and so does the run.
                tg.cancel_scope.cancel()
    assert (await finished(world, run_id))["status"] == "cancelled"
