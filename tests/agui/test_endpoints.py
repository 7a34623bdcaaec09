"""POST /agui and /agui/ws against a real uvicorn: framing, errors, disconnects, the socket."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import ag_ui.core
import httpx
import pytest
import websockets.exceptions
import websockets.sync.client as ws_client
from pydantic import TypeAdapter

from tests.gateway.harness import running_gateway
from tests.node_clients import NODE_DIR, node_clients
from tests.waiting import wait_until

pytestmark = pytest.mark.gateway(scripted_delay_s=0.005, keepalive_s=0.3)

EVENT = TypeAdapter(ag_ui.core.Event)
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


counter = iter(range(1_000_000))


def body(text: str, **extra: Any) -> dict[str, Any]:
    n = next(counter)
    return {
        "threadId": f"thread-{n}",
        "runId": f"agui-run-{n}-{time.monotonic_ns()}",
        "messages": [{"id": f"m{n}", "role": "user", "content": text}],
        **extra,
    }


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for block in raw.split(b"\n\n"):
        data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
        if data:
            events.append(json.loads(b"\n".join(data)))
    return events


def test_post_streams_valid_events_with_lf_framing(gateway: str) -> None:
    request = body("plain hi", protocolVersion="1.0")
    with httpx.stream("POST", f"{gateway}/agui", json=request, timeout=20) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(response.iter_bytes())
    assert b"\r" not in raw
    events = sse_events(raw)
    for event in events:
        EVENT.validate_python(event)
    assert events[0] == {
        "type": "RUN_STARTED",
        "threadId": request["threadId"],
        "runId": request["runId"],
        "protocolVersion": "1.0",
    }
    assert events[-1]["type"] == "RUN_FINISHED"
    run = httpx.get(f"{gateway}/v1/runs/{request['runId']}").json()
    assert run["thread_id"] == request["threadId"] and run["status"] == "completed"


def test_bad_input_is_a_422_naming_the_field_before_the_stream(gateway: str) -> None:
    cases = [
        ({"threadId": "t", "runId": "r"}, "`messages`"),
        ({"threadId": "t", "runId": "r", "messages": [{"role": "robot"}]}, "messages[0].role"),
        ({"threadId": 1, "runId": "r", "messages": []}, "`threadId`"),
        (body("x", tools=[{"description": "no name"}]), "tools[0]"),
        (body("x", resume=[{"interruptId": "nope", "status": "resolved"}]), "interruptId"),
    ]
    for request, needle in cases:
        response = httpx.post(f"{gateway}/agui", json=request)
        assert response.status_code == 422, (request, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert needle in response.json()["detail"], response.json()
    empty = httpx.post(f"{gateway}/agui", json={"threadId": "t", "runId": "e", "messages": []})
    assert empty.status_code == 422 and "input is required" in empty.json()["detail"]
    malformed = httpx.post(f"{gateway}/agui", content=b"{not json")
    assert malformed.status_code == 400


def test_a_taken_run_id_is_a_conflict(gateway: str) -> None:
    request = body("plain one")
    with httpx.stream("POST", f"{gateway}/agui", json=request, timeout=20) as response:
        response.read()
    again = httpx.post(f"{gateway}/agui", json=request)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]


def wait_status(base: str, run_id: str) -> str:
    """The run's status once it has one (it has ended)."""

    def status() -> str | None:
        found: str | None = httpx.get(f"{base}/v1/runs/{run_id}").json()["status"]
        return found

    return wait_until(status, 10, f"run {run_id} to end")


def test_disconnect_cancels_unless_detached(gateway: str) -> None:
    attached = body("tell me a long story")
    with httpx.stream("POST", f"{gateway}/agui", json=attached, timeout=20) as response:
        next(response.iter_bytes())
    assert wait_status(gateway, attached["runId"]) == "cancelled"

    detached = body("tell me a long story", forwardedProps={"loopgate": {"detached": True}})
    with httpx.stream("POST", f"{gateway}/agui", json=detached, timeout=20) as response:
        next(response.iter_bytes())
    assert wait_status(gateway, detached["runId"]) == "completed"


def test_keepalive_comment_on_a_quiet_run(gateway: str) -> None:
    request = body("slow tool please", forwardedProps={"loopgate": {"detached": True}})
    with httpx.stream("POST", f"{gateway}/agui", json=request, timeout=20) as response:
        chunks = []
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            if b": keep-alive\n" in b"".join(chunks):
                break
    # The native stream's comment: no blank line after it (the JS client, which splits on
    # "\n\n" and reads only data lines, finds it in front of the next event and skips it).
    assert b"\n: keep-alive\n" in b"".join(chunks)
    httpx.post(f"{gateway}/v1/runs/{request['runId']}/cancel")


def receive_run(ws: Any) -> list[dict[str, Any]]:
    events = []
    while True:
        event = json.loads(ws.recv(timeout=20))
        events.append(event)
        if event["type"] in TERMINAL:
            return events


def test_websocket_runs_errors_and_cancel(gateway: str) -> None:
    url = gateway.replace("http", "ws") + "/agui/ws"
    with ws_client.connect(url) as ws:
        ws.send(json.dumps(body("plain first", protocolVersion="1.0")))
        first = receive_run(ws)
        for event in first:
            EVENT.validate_python(event)
        assert first[0]["type"] == "RUN_STARTED" and first[-1]["type"] == "RUN_FINISHED"

        ws.send("{nope")
        error = json.loads(ws.recv(timeout=5))
        assert error["type"] == "RUN_ERROR" and error["code"] == "invalid_input"
        ws.send(json.dumps({"threadId": "t", "runId": "r"}))
        error = json.loads(ws.recv(timeout=5))
        assert error["code"] == "invalid_input" and "messages" in error["message"]
        ws.send(json.dumps({"type": "cancel"}))
        assert json.loads(ws.recv(timeout=5))["code"] == "no_active_run"

        ws.send(json.dumps(body("tell me a long story", protocolVersion="1.0")))
        assert json.loads(ws.recv(timeout=5))["type"] == "RUN_STARTED"
        ws.send(json.dumps(body("plain second")))
        busy = None
        events = []
        while busy is None:
            event = json.loads(ws.recv(timeout=5))
            if event.get("name") == "loopgate.error":
                busy = event
            else:
                events.append(event)
        assert busy["type"] == "CUSTOM" and busy["value"]["code"] == "busy"
        ws.send(json.dumps({"type": "cancel"}))
        rest = receive_run(ws)
        assert rest[-1]["type"] == "RUN_FINISHED"
        assert rest[-1]["outcome"] == {"type": "cancelled"}

        ws.send(json.dumps(body("plain third")))
        assert receive_run(ws)[-1]["type"] == "RUN_FINISHED"


def test_websocket_close_cancels_the_active_run(gateway: str) -> None:
    request = body("tell me a long story")
    with ws_client.connect(gateway.replace("http", "ws") + "/agui/ws") as ws:
        ws.send(json.dumps(request))
        assert json.loads(ws.recv(timeout=5))["type"] == "RUN_STARTED"
    assert wait_status(gateway, request["runId"]) == "cancelled"


def test_websocket_origin_is_checked(gateway: str) -> None:
    url = gateway.replace("http", "ws") + "/agui/ws"
    with pytest.raises(websockets.exceptions.InvalidStatus):
        ws_client.connect(url, origin="https://elsewhere.example")


def test_run_started_names_the_trace_when_telemetry_is_on(tmp_path: Path) -> None:
    with running_gateway(scripted_delay_s=0.0, trace_console=True) as (url, _):
        request = body("plain traced", protocolVersion="1.0")
        with httpx.stream("POST", f"{url}/agui", json=request, timeout=20) as response:
            events = sse_events(response.read())
        run = httpx.get(f"{url}/v1/runs/{request['runId']}").json()
    EVENT.validate_python(events[0])
    assert events[0]["metadata"] == {
        "traceId": run["metadata"]["trace_id"],
        "traceparent": run["metadata"]["traceparent"],
    }
    assert len(events[0]["metadata"]["traceId"]) == 32
    # The real client takes the whole run, metadata included, without a warning.
    recorded = tmp_path / "traced.jsonl"
    recorded.write_text("".join(json.dumps(e) + "\n" for e in events))
    checked = subprocess.run(
        [node_clients(), str(NODE_DIR / "agui-verify.mjs"), str(recorded)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_of_two_interrupts_resumes_with_its_own_call(gateway: str) -> None:
    """A completion listing two interrupts mints ``<run>:interrupt:<seq>:<i>``; resuming one
    answers the call that interrupt names (once parsed as digits only: 422)."""
    run_id = f"two-interrupts-{time.monotonic_ns()}"
    httpx.post(f"{gateway}/v1/runs", json={"source": "ingest", "run_id": run_id}).raise_for_status()
    events = [
        {"kind": "tool_call_start", "data": {"id": "ask-a", "name": "ask_user", "arguments": {}}},
        {"kind": "tool_call_start", "data": {"id": "ask-b", "name": "ask_user", "arguments": {}}},
        {
            "kind": "completion",
            "data": {
                "status": "waiting_user",
                "reason": "ask_user",
                "interrupts": [
                    {"toolCallId": "ask-a", "message": "A or B?"},
                    {"toolCallId": "ask-b", "message": "Red or blue?"},
                ],
            },
        },
    ]
    lines = "".join(json.dumps(e) + "\n" for e in events)
    pushed = httpx.post(
        f"{gateway}/v1/runs/{run_id}/events",
        content=lines,
        headers={"content-type": "application/x-ndjson"},
    )
    assert pushed.status_code == 200, pushed.text
    watch = {
        "threadId": run_id,
        "runId": run_id,
        "messages": [],
        "protocolVersion": "1.0",
        "forwardedProps": {"loopgate": {"attach": True}},
    }
    raw = httpx.post(f"{gateway}/agui", json=watch, timeout=20).content
    interrupts = [e for e in sse_events(raw) if e["type"] == "RUN_FINISHED"][-1]["outcome"][
        "interrupts"
    ]
    assert [i["id"] for i in interrupts] == [f"{run_id}:interrupt:3:0", f"{run_id}:interrupt:3:1"]
    assert [i["toolCallId"] for i in interrupts] == ["ask-a", "ask-b"]

    resume = body(
        "plain go on",
        resume=[{"interruptId": interrupts[1]["id"], "status": "resolved", "payload": "blue"}],
    )
    with httpx.stream("POST", f"{gateway}/agui", json=resume, timeout=20) as response:
        assert response.status_code == 200, response.read()
        streamed = sse_events(b"".join(response.iter_bytes()))
    assert streamed[-1]["type"] == "RUN_FINISHED"
    started = httpx.get(f"{gateway}/v1/runs/{resume['runId']}").json()
    # The suspended call is paired into the history, answered by the second interrupt's payload.
    assert started["input"][1:] == [
        {"role": "assistant", "tool_calls": [{"id": "ask-b", "name": "ask_user", "arguments": {}}]},
        {"role": "tool", "content": "blue", "tool_call_id": "ask-b"},
    ]
