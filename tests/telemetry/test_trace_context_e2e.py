"""Incoming trace context through every protocol, against the real server with telemetry on.

The run span is a child of the caller's context exactly when the run's trace id is the
caller's; each protocol must carry it in (header or ``_meta``) and name the trace back out.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets.sync.client as ws_client

pytestmark = pytest.mark.gateway(trace_console=True)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
TRACESTATE = "vendor=opaque,other=1"


def run_trace(base: str, run_id: str) -> str:
    return httpx.get(f"{base}/v1/runs/{run_id}").json()["metadata"]["trace_id"]


def run_tracestate(base: str, run_id: str) -> str | None:
    return httpx.get(f"{base}/v1/runs/{run_id}").json()["metadata"].get("tracestate")


def test_native_api_header(gateway: str) -> None:
    run = httpx.post(
        f"{gateway}/v1/runs", json={"input": "plain"}, headers={"traceparent": TRACEPARENT}
    )
    assert run.json()["metadata"]["trace_id"] == TRACE_ID
    other = httpx.post(f"{gateway}/v1/runs", json={"input": "plain"}).json()
    assert other["metadata"]["trace_id"] != TRACE_ID  # no parent: a trace of its own


def test_agui_header_and_run_started(gateway: str) -> None:
    body = {
        "threadId": "t-trace",
        "runId": "agui-traced",
        "messages": [{"id": "m", "role": "user", "content": "plain"}],
    }
    with httpx.stream(
        "POST", f"{gateway}/agui", json=body, headers={"traceparent": TRACEPARENT}, timeout=20
    ) as response:
        first = next(response.iter_lines())
    started = json.loads(first.removeprefix("data: "))
    assert started["metadata"]["traceId"] == TRACE_ID
    assert run_trace(gateway, "agui-traced") == TRACE_ID


def test_jsonrpc_meta_over_websocket(gateway: str) -> None:
    with ws_client.connect(gateway.replace("http", "ws") + "/rpc/ws") as ws:
        ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "run.start",
                    "params": {
                        "input": "plain",
                        "_meta": {"traceparent": TRACEPARENT, "tracestate": TRACESTATE},
                    },
                }
            )
        )
        answer = json.loads(ws.recv(timeout=10))
    assert answer["id"] == 7, answer
    assert run_trace(gateway, answer["result"]["runId"]) == TRACE_ID
    assert run_tracestate(gateway, answer["result"]["runId"]) == TRACESTATE


def test_jsonrpc_over_http_headers_unless_the_call_has_its_own(gateway: str) -> None:
    headers = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    own = f"00-{'a' * 32}-{'b' * 16}-01"

    def start(meta: dict[str, str] | None) -> str:
        params: dict[str, Any] = {"input": "plain"}
        if meta is not None:
            params["_meta"] = meta
        body = {"jsonrpc": "2.0", "id": 1, "method": "run.start", "params": params}
        answer = httpx.post(f"{gateway}/rpc", json=body, headers=headers).json()
        return answer["result"]["runId"]

    from_headers = start(None)
    assert run_trace(gateway, from_headers) == TRACE_ID
    assert run_tracestate(gateway, from_headers) == TRACESTATE
    # A call's own `_meta` context wins, whole: the header's tracestate is not mixed in.
    from_meta = start({"traceparent": own})
    assert run_trace(gateway, from_meta) == "a" * 32
    assert run_tracestate(gateway, from_meta) is None


def acp_call(ws: Any, id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))
    while True:
        message = json.loads(ws.recv(timeout=20))
        if message.get("id") == id_:
            return message


def test_acp_meta_over_websocket(gateway: str) -> None:
    with ws_client.connect(gateway.replace("http", "ws") + "/acp") as ws:
        acp_call(ws, 0, "initialize", {"protocolVersion": 1})
        session = acp_call(ws, 1, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]
        answer = acp_call(
            ws,
            2,
            "session/prompt",
            {
                "sessionId": session["sessionId"],
                "prompt": [{"type": "text", "text": "plain"}],
                "_meta": {"traceparent": TRACEPARENT, "tracestate": TRACESTATE},
            },
        )
    assert answer["result"]["stopReason"] == "end_turn"
    assert answer["result"]["_meta"]["loopgate"]["traceId"] == TRACE_ID
    assert run_tracestate(gateway, answer["result"]["_meta"]["loopgate"]["runId"]) == TRACESTATE
