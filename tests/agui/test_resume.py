"""Resuming an AG-UI stream after a dropped connection: a request that says it ``received`` k
events gets that request's stream without its first k, over POST /agui and /agui/ws."""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import websockets.sync.client as ws_client
from websockets.sync.client import ClientConnection

from loopgate.adapters.agui.adapter import ADAPTER
from loopgate.adapters.agui.input import MAX_CURSOR, RunAgentInput
from loopgate.adapters.agui.runs import plan_run
from loopgate.adapters.agui.stream import AguiStream, Resumed
from loopgate.adapters.shared.follow import CONNECTION
from loopgate.adapters.shared.problem import HttpProblem
from loopgate.contracts.envelope import Envelope, LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings
from tests.agui.test_endpoints import body, receive_run, sse_events, wait_status

# The gateway is paced: a default run takes over a second, so a dropped client resumes a
# live run.
pytestmark = pytest.mark.gateway(scripted_delay_s=0.02)

RECORDINGS = (
    "parallel-tools",
    "reasoning-answer",
    "cancel-mid-text",
    "cancel-mid-tool",
    "waiting-user",
    "provider-error",
    "steering",
    "unknown-kinds-fields",
)

# --- the stream a plan gives, in-process: every k of every recording ------------------------


def hub_for(tmp_path: Path) -> Hub:
    return build_hub(Settings(scripted_delay_s=0.0, workspace=str(tmp_path)))


async def finished(hub: Hub, run_id: str) -> None:
    async with hub.subscribe(run_id) as subscription:
        while not subscription.done:
            await subscription.next_batch()


async def stream_of(hub: Hub, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The AG-UI events ``request`` streams, as a client decodes them."""
    plan = await plan_run(hub, msgspec.convert(request, RunAgentInput), None)
    events: list[dict[str, Any]] = []

    class Decoded(AguiStream):
        async def send(self, messages: list[Any]) -> None:
            events.extend(json.loads(ADAPTER.render_json(event)) for event in messages)

    await Decoded(ADAPTER, hub, plan, CONNECTION).run()
    return events


def attach(run_id: str, version: str | None = "1.0", **ours: Any) -> dict[str, Any]:
    return {
        "threadId": "ignored",
        "runId": run_id,
        "messages": [],
        "protocolVersion": version,
        "forwardedProps": {"loopgate": {"attach": True, **ours}},
    }


async def check_every_count(hub: Hub, request: dict[str, Any]) -> int:
    """For every k from 0 to past the stream's end: received k is the stream without k."""
    whole = await stream_of(hub, request)
    props = request["forwardedProps"]["loopgate"]
    for k in range(len(whole) + 2):
        resumed = {**request, "forwardedProps": {"loopgate": {**props, "received": k}}}
        assert await stream_of(hub, resumed) == whole[k:], (request, k)
    return len(whole)


@pytest.mark.anyio
@pytest.mark.parametrize("name", RECORDINGS)
async def test_every_count_of_a_replayed_recording(tmp_path: Path, name: str) -> None:
    async with hub_for(tmp_path) as hub:
        info = await hub.start(StartRun(source="replay", replay=name))
        await finished(hub, info.id)
        length = await check_every_count(hub, attach(info.id))
        assert length > 5
        await check_every_count(hub, attach(info.id, None))
        # From a cursor (a stream that was itself attached mid-run): its calls are known.
        middle = (await hub.get(info.id)).last_seq // 2
        await check_every_count(hub, attach(info.id, after=middle))


PERMISSION_RUN = [
    ("stage_start", {"model": "m"}),
    ("llm_request", {"round": 1, "attempt": 1}),
    ("content_delta", {"delta": "Saving the note."}),
    ("tool_call_start", {"id": "call_w", "name": "write_note", "arguments": {"name": "n"}}),
    ("permission_request", {"requestId": "perm_1", "toolCall": {"id": "call_w", "name": "w"}}),
    (
        "permission_result",
        {"requestId": "perm_1", "toolCallId": "call_w", "decision": "allow_once"},
    ),
    ("tool_call_result", {"id": "call_w", "name": "write_note", "success": True}),
    ("content_delta", {"delta": "Saved."}),
    ("completion", {"status": "completed"}),
]


@pytest.mark.anyio
async def test_every_count_of_an_approval_answered_again(tmp_path: Path) -> None:
    """Answering the same approval again (it is decided already) is the same stream."""
    async with hub_for(tmp_path) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        for kind, data in PERMISSION_RUN:
            await hub.push(run_id, LoopEvent(kind, data))
        await finished(hub, run_id)
        answer = {
            "threadId": "t",
            "runId": "ignored",
            "messages": [],
            "protocolVersion": "1.0",
            "resume": [
                {
                    "interruptId": f"{run_id}:permission:perm_1",
                    "status": "resolved",
                    "payload": {"decision": "allow_once"},
                }
            ],
            "forwardedProps": {"loopgate": {}},
        }
        whole = await stream_of(hub, answer)
        assert whole[0]["type"] == "RUN_STARTED" and whole[-1]["type"] == "RUN_FINISHED"
        assert any(e["type"] == "TOOL_CALL_RESULT" for e in whole)
        await check_every_count(hub, answer)


@pytest.mark.anyio
async def test_received_is_refused_where_there_is_nothing_to_resume(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        new = body("plain hi", forwardedProps={"loopgate": {"received": 0}})
        with pytest.raises(HttpProblem) as refused:
            await stream_of(hub, new)
        assert refused.value.status == 422
        assert "starts a new run" in refused.value.detail
        assert await hub.list_runs() == []  # refused before anything started
        for bad in ("3", -1, True, 1.5, None, MAX_CURSOR + 1):
            with pytest.raises(HttpProblem) as refused:
                await stream_of(hub, attach("any", received=bad))
            assert refused.value.status == 422
            assert refused.value.detail == (
                f"forwardedProps.loopgate.received must be an integer from 0 to {MAX_CURSOR}"
            )


class Batches:
    """A projector whose every call returns the next batch of ``sizes`` from ``events``."""

    def __init__(self, events: list[int], sizes: list[int]) -> None:
        self.events, self.sizes, self.at = events, iter(sizes), 0

    def next(self) -> list[int]:
        size = next(self.sizes)
        self.at += size
        return self.events[self.at - size : self.at]

    def start(self) -> list[int]:
        return self.next()

    def feed(self, envelope: Envelope) -> list[int]:
        return self.next()

    def close(self, reason: str | None = None) -> list[int]:
        return self.next()


def test_skipping_counts_events_however_they_are_batched() -> None:
    events = list(range(7))
    for sizes in ([7], [1] * 7, [3, 0, 4], [2, 5], [6, 1]):
        for k in range(9):
            resumed = Resumed(Batches(events, sizes), k)
            sent = resumed.start()
            for seq in range(1, len(sizes) - 1):
                sent += resumed.feed(Envelope("r", seq, 0, "content_delta", {}))
            if len(sizes) > 1:
                sent += resumed.close()
            assert sent == events[k:], (sizes, k)


# --- real sockets ---------------------------------------------------------------------------


def ws_url(base: str) -> str:
    return base.replace("http", "ws") + "/agui/ws"


def drop(ws: ClientConnection) -> None:
    """Gone without a close frame: the TCP connection reset, as when a network drops."""
    ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    ws.close_socket()


def replayed(base: str, name: str) -> str:
    started = httpx.post(f"{base}/v1/runs", json={"replay": name})
    assert started.status_code == 201, started.text
    run_id: str = started.json()["id"]
    assert wait_status(base, run_id) is not None
    return run_id


def post_stream(base: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(f"{base}/agui", json=request, timeout=30)
    assert response.status_code == 200, response.text
    return sse_events(response.content)


def ws_stream(base: str, frame: dict[str, Any], count: int | None = None) -> list[dict[str, Any]]:
    """The frames one request gets on a fresh socket: ``count`` of them, else to the end."""
    with ws_client.connect(ws_url(base)) as ws:
        ws.send(json.dumps(frame))
        if count is None:
            return receive_run(ws)
        return [json.loads(ws.recv(timeout=20)) for _ in range(count)]


def resume_frame(run_id: str, received: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "resume", "runId": run_id, "received": received, **extra}


@pytest.mark.parametrize("name", ["parallel-tools", "cancel-mid-tool", "waiting-user"])
def test_a_replayed_run_resumed_over_both_bindings(gateway: str, name: str) -> None:
    run_id = replayed(gateway, name)
    whole = post_stream(gateway, attach(run_id))
    assert ws_stream(gateway, attach(run_id)) == whole
    n = len(whole)
    for k in sorted({0, 1, n // 2, n - 1}):
        resumed = post_stream(gateway, attach(run_id, received=k))
        assert resumed == whole[k:], k
        assert ws_stream(gateway, resume_frame(run_id, k, protocolVersion="1.0")) == whole[k:], k
    # Everything received: an empty answer over HTTP.
    assert post_stream(gateway, attach(run_id, received=n)) == []
    # From a cursor: the resume frame's ``after`` is the dropped attach's.
    after = n // 3
    from_after = ws_stream(gateway, attach(run_id, after=after))
    frame = resume_frame(run_id, 2, after=after, protocolVersion="1.0")
    assert ws_stream(gateway, frame) == from_after[2:]


def test_a_detached_run_survives_a_dropped_socket_and_resumes(gateway: str) -> None:
    # A run that cannot end on its own: it waits for the approval of its write_note call.
    detached = {"loopgate": {"detached": True}}
    request = body("write note groceries", protocolVersion="1.0", forwardedProps=detached)
    with ws_client.connect(ws_url(gateway)) as ws:
        ws.send(json.dumps(request))
        got = [json.loads(ws.recv(timeout=20)) for _ in range(5)]
        drop(ws)
    assert got[0]["type"] == "RUN_STARTED"

    run_url = f"{gateway}/v1/runs/{request['runId']}"
    frame = resume_frame(request["runId"], len(got), threadId=request["threadId"])
    rest = ws_stream(gateway, {**frame, "protocolVersion": "1.0"})
    # The stream ends where the run waits for the approval; the run itself goes on.
    assert rest[-1]["type"] == "RUN_FINISHED"
    assert rest[-1]["outcome"]["type"] == "interrupt"
    assert httpx.get(run_url).json()["state"] == "running"
    assert got + rest == ws_stream(gateway, attach(request["runId"]))
    assert httpx.post(f"{run_url}/cancel").status_code == 202
    assert wait_status(gateway, request["runId"]) == "cancelled"


def test_a_run_not_detached_is_cancelled_by_a_dropped_socket(gateway: str) -> None:
    request = body("tell me a long story", protocolVersion="1.0")
    with ws_client.connect(ws_url(gateway)) as ws:
        ws.send(json.dumps(request))
        assert json.loads(ws.recv(timeout=20))["type"] == "RUN_STARTED"
        drop(ws)
    assert wait_status(gateway, request["runId"]) == "cancelled"


def read_some(base: str, request: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of a POST /agui, then the connection closed."""
    buffer = b""
    with httpx.stream("POST", f"{base}/agui", json=request, timeout=20) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            buffer += chunk
            events = sse_events(buffer[: buffer.rfind(b"\n\n") + 1])
            if len(events) >= count:
                return events
    raise AssertionError(f"the stream ended after {len(sse_events(buffer))} events")


def test_a_dropped_http_stream_resumes_with_received(gateway: str) -> None:
    detached = {"loopgate": {"detached": True}}
    request = body("tell me a long story", protocolVersion="1.0", forwardedProps=detached)
    got = read_some(gateway, request, 12)
    rest = post_stream(gateway, attach(request["runId"], received=len(got)))
    assert rest[-1]["type"] == "RUN_FINISHED"
    assert got + rest == post_stream(gateway, attach(request["runId"]))
    assert wait_status(gateway, request["runId"]) == "completed"


def test_an_approval_stream_resumes_by_answering_again(gateway: str) -> None:
    detached = {"loopgate": {"detached": True}}
    ask = body("write note please", protocolVersion="1.0", forwardedProps=detached)
    asked = post_stream(gateway, ask)
    (interrupt,) = asked[-1]["outcome"]["interrupts"]
    resume = [
        {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"decision": "allow_once"},
        }
    ]
    answer = body("", protocolVersion="1.0", resume=resume, forwardedProps=detached)
    got = read_some(gateway, answer, 3)

    def again(received: int) -> dict[str, Any]:
        return {**answer, "forwardedProps": {"loopgate": {"detached": True, "received": received}}}

    rest = post_stream(gateway, again(len(got)))
    assert got + rest == post_stream(gateway, again(0))
    assert rest[-1]["type"] == "RUN_FINISHED"
    run = httpx.get(f"{gateway}/v1/runs/{ask['runId']}").json()
    assert run["status"] == "completed"
    # The same over the socket: the answer frame again, with the count.
    assert ws_stream(gateway, again(len(got))) == rest


def test_received_over_http_is_checked(gateway: str) -> None:
    new = body("plain hi", forwardedProps={"loopgate": {"received": 3}})
    refused = httpx.post(f"{gateway}/agui", json=new)
    assert refused.status_code == 422 and "starts a new run" in refused.json()["detail"]
    assert httpx.get(f"{gateway}/v1/runs/{new['runId']}").status_code == 404
    negative = httpx.post(f"{gateway}/agui", json=attach("any", received=-1))
    assert negative.status_code == 422 and "received must be an integer" in negative.text
    unknown = httpx.post(f"{gateway}/agui", json=attach(f"nope-{time.monotonic_ns()}", received=1))
    assert unknown.status_code == 404


def test_bad_resume_frames_get_error_frames(gateway: str) -> None:
    unknown = f"nope-{time.monotonic_ns()}"
    cases: list[tuple[dict[str, Any], str]] = [
        (resume_frame("r", "3"), "Expected `int`, got `str` - at `received`"),
        (resume_frame("r", True), "Expected `int`, got `bool` - at `received`"),
        (resume_frame("r", 1.5), "Expected `int`, got `float` - at `received`"),
        (resume_frame("r", -1), "Expected `int` >= 0 - at `received`"),
        (resume_frame("r", 1, after=-2), "Expected `int` >= 0 - at `after`"),
        ({"type": "resume", "received": 1}, "Object missing required field `runId`"),
        ({"type": "resume", "runId": "r"}, "Object missing required field `received`"),
        ({"type": "resume", "runId": 7, "received": 1}, "Expected `str`, got `int` - at `runId`"),
    ]
    with ws_client.connect(ws_url(gateway)) as ws:
        for frame, needle in cases:
            ws.send(json.dumps(frame))
            error = json.loads(ws.recv(timeout=5))
            assert error == {
                "type": "RUN_ERROR",
                "message": f"invalid frame: {needle}",
                "code": "invalid_input",
            }, frame
        # An unknown run: what an attaching RunAgentInput to it gets.
        ws.send(json.dumps(resume_frame(unknown, 0)))
        by_frame = json.loads(ws.recv(timeout=5))
        ws.send(json.dumps(attach(unknown)))
        assert by_frame == json.loads(ws.recv(timeout=5))
        assert by_frame["type"] == "RUN_ERROR" and by_frame["code"] == "invalid_input"
        assert unknown in by_frame["message"]
        # A new run with ``received``: nothing to resume.
        ws.send(json.dumps(body("plain hi", forwardedProps={"loopgate": {"received": 1}})))
        error = json.loads(ws.recv(timeout=5))
        assert error["code"] == "invalid_input" and "starts a new run" in error["message"]

        # Busy: a run is active on the socket.
        run = body("tell me a long story", protocolVersion="1.0")
        ws.send(json.dumps(run))
        assert json.loads(ws.recv(timeout=5))["type"] == "RUN_STARTED"
        ws.send(json.dumps(resume_frame(run["runId"], 1)))
        busy = None
        while busy is None:
            event = json.loads(ws.recv(timeout=5))
            if event.get("name") == "loopgate.error":
                busy = event
        assert busy["type"] == "CUSTOM" and busy["value"]["code"] == "busy"
        ws.send(json.dumps({"type": "cancel"}))
        assert receive_run(ws)[-1]["outcome"] == {"type": "cancelled"}
        # The socket goes on: the cancelled run resumed on it, skipping its RUN_STARTED.
        ws.send(json.dumps(resume_frame(run["runId"], 1, protocolVersion="1.0")))
        rest = receive_run(ws)
        assert rest == ws_stream(gateway, attach(run["runId"]))[1:]
