"""Deep JSON (1,000 levels, ~2 KB) on every parser, over real sockets and processes: each gets
its protocol's own error, and the socket or process answers the next valid message.

Before the bound these were a 500 with a RecursionError (POST /agui, POST /v1/runs, ingest
lines), a 1006 abort (/agui/ws, ingest WS) and an exiting process (`loopgate acp`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets.sync.client as ws_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.acp.support import REPO, agent_command, agent_env
from tests.fakes.servers import serve_app
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.jsonrpc.jsonrpc_support import RpcProcess

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000
TOO_DEEP = "nested deeper than 128 levels"
DONE = {"kind": "completion", "data": {"status": "completed"}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def ws(base: str, path: str) -> Any:
    return ws_client.connect(base.replace("http://", "ws://") + path, open_timeout=10)


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert "Traceback" not in response.text and "RecursionError" not in response.text
    return body


def start_ingest(base: str) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"source": "ingest"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def agui_input(run_id: str, text: str = "hello") -> dict[str, Any]:
    return {
        "threadId": f"t-{run_id}",
        "runId": run_id,
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "state": None,
        "forwardedProps": None,
    }


@pytest.mark.parametrize("deep", [DEEP, DEEP_OBJECT], ids=["arrays", "objects"])
def test_http_bodies(gateway: str, deep: str) -> None:
    run_id = start_ingest(gateway)
    for path in ("/v1/runs", "/agui", f"/v1/runs/{run_id}/steer", f"/v1/runs/{run_id}/respond"):
        body = '{"input": ' + deep + "}"
        detail = problem(httpx.post(gateway + path, content=body), 400)["detail"]
        assert detail == f"malformed JSON: JSON is {TOO_DEEP}", path
    # The server goes on: the next valid request is served.
    assert httpx.post(f"{gateway}/v1/runs", json={"input": "hello"}).status_code == 201


def test_jsonrpc_over_http(gateway: str) -> None:
    post = lambda body: httpx.post(  # noqa: E731
        f"{gateway}/rpc", content=body, headers={"content-type": "application/json"}
    )
    reply = post(DEEP).json()
    assert reply["error"]["code"] == -32700 and reply["id"] is None
    assert reply["error"]["data"]["detail"] == f"JSON is {TOO_DEEP}"
    nested = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run.list"})[:-1]
    reply = post(nested + ', "params": {"x": ' + DEEP_OBJECT + "}}").json()
    assert reply["error"]["code"] == -32700
    reply = post(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "run.list"})).json()
    assert reply["id"] == 2 and "runs" in reply["result"]


def test_ingest_ndjson_line(gateway: str) -> None:
    run_id = start_ingest(gateway)
    lines = [
        json.dumps({"kind": "content_delta", "data": {"delta": "a"}}),
        '{"kind": "content_delta", "data": {"delta": ' + DEEP + "}}",
        json.dumps(DONE),
    ]
    response = httpx.post(f"{gateway}/v1/runs/{run_id}/events", content="\n".join(lines))
    body = problem(response, 422)
    assert body["line"] == 2 and body["accepted"] == 1 and TOO_DEEP in body["detail"]
    # The run stays open for a corrected retry, which is then processed.
    done = httpx.post(f"{gateway}/v1/runs/{run_id}/events", content=json.dumps(DONE))
    assert done.status_code == 200 and done.json()["run"]["status"] == "completed"


def test_agui_websocket(gateway: str) -> None:
    with ws(gateway, "/agui/ws") as sock:
        sock.send(DEEP)
        error = json.loads(sock.recv(timeout=10))
        assert error["type"] == "RUN_ERROR" and error["code"] == "invalid_input"
        assert TOO_DEEP in error["message"]
        sock.send(json.dumps(agui_input("deep-agui-ws")))
        types = []
        while not types or types[-1] not in ("RUN_FINISHED", "RUN_ERROR"):
            types.append(json.loads(sock.recv(timeout=20))["type"])
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"


def test_ingest_websocket(gateway: str) -> None:
    run_id = start_ingest(gateway)
    with ws(gateway, f"/v1/runs/{run_id}/ingest") as sock:
        sock.send('{"kind": "x", "data": {"a": ' + DEEP_OBJECT + "}}")
        error = json.loads(sock.recv(timeout=10))
        assert error == {"type": "error", "frame": 1, "detail": f"JSON is {TOO_DEEP}"}
        sock.send(json.dumps(DONE))
        assert json.loads(sock.recv(timeout=10)) == {"type": "end", "frame": 2, "seq": 1}


def test_jsonrpc_websocket(gateway: str) -> None:
    with ws(gateway, "/rpc/ws") as sock:
        sock.send(DEEP)
        assert json.loads(sock.recv(timeout=10))["error"]["code"] == -32700
        sock.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "run.list"}))
        reply = json.loads(sock.recv(timeout=10))
        assert reply["id"] == 7 and "runs" in reply["result"]


def test_acp_websocket(gateway: str) -> None:
    with ws(gateway, "/acp") as sock:
        sock.send(DEEP_OBJECT)
        error = json.loads(sock.recv(timeout=10))
        assert error["error"]["code"] == -32700 and TOO_DEEP in error["error"]["message"]
        sock.send(json.dumps(INITIALIZE))
        reply = json.loads(sock.recv(timeout=10))
        assert reply["id"] == 1 and reply["result"]["protocolVersion"] == 1


def test_loopgate_acp_on_stdio() -> None:
    proc = subprocess.Popen(
        agent_command(),
        cwd=REPO,
        env=agent_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(DEEP.encode() + b"\n" + json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        error = json.loads(proc.stdout.readline())
        assert error["error"]["code"] == -32700 and TOO_DEEP in error["error"]["message"]
        reply = json.loads(proc.stdout.readline())
        assert reply["id"] == 1 and reply["result"]["protocolVersion"] == 1
        proc.stdin.close()
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr = proc.stderr.read() if proc.stderr else b""
        assert b"RecursionError" not in stderr and b"Traceback" not in stderr


def test_loopgate_rpc_on_stdio() -> None:
    with RpcProcess() as rpc:
        rpc.send(DEEP.encode())
        error = rpc.recv()
        assert error["error"]["code"] == -32700 and error["id"] is None
        reply, _ = rpc.call("run.list")
        assert "runs" in reply["result"]
        assert rpc.finish() == 0
    assert b"Traceback" not in rpc.stderr


@pytest.fixture(scope="module")
def deep_loop() -> Iterator[str]:
    """An HTTP loop whose second line is deep JSON."""

    async def run(request: Request) -> Response:
        first = json.dumps({"kind": "content_delta", "data": {"delta": "hi"}})
        return Response(f"{first}\n{DEEP}\n", media_type="application/x-ndjson")

    with serve_app(Starlette(routes=[Route("/run", run, methods=["POST"])])) as base:
        yield base + "/run"


def test_a_plugged_loops_deep_line(deep_loop: str) -> None:
    with running_gateway(loop_url=deep_loop, loop_first_event_timeout_s=5.0) as (base, _):
        run_id = httpx.post(f"{base}/v1/runs", json={"input": "x"}).json()["id"]
        events = envelopes(read_stream(base, run_id))
        completion = events[-1]["data"]
        assert (events[0]["kind"], events[-1]["kind"]) == ("content_delta", "completion")
        assert completion["status"] == "failed" and completion["reason"] == "loop_invalid_event"
        assert completion["message"] == f"event 2: JSON is {TOO_DEEP}"
        # The gateway goes on serving (the next run meets the same loop, and ends the same way).
        assert httpx.post(f"{base}/v1/runs", json={"input": "y"}).status_code == 201
