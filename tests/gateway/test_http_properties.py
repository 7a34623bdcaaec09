"""Arbitrary JSON and bytes at every body-taking HTTP endpoint and WebSocket of the native
API and AG-UI: never a 5xx, never a stack trace, always the protocol's own error shape, and
the socket stays open after a bad frame."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets.sync.client as ws_client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.gateway(max_active_runs=400)

PROPERTY_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
# Objects shaped almost like the real bodies reach deeper validation than random values do.
near_bodies = st.fixed_dictionaries(
    {},
    optional={
        "input": json_values,
        "config": json_values,
        "source": st.sampled_from(["loop", "ingest", "other"]) | json_values,
        "replay": st.text(max_size=30) | json_values,
        "threadId": st.text(max_size=10) | json_values,
        "runId": st.text(max_size=10) | json_values,
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant", "tool", "x"])},
                optional={"content": json_values, "toolCallId": json_values},
            ),
            max_size=3,
        )
        | json_values,
        "kind": st.text(max_size=12) | json_values,
        "data": json_values,
        "content": json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    near_bodies.map(lambda v: json.dumps(v).encode()),
)
OK_STATUSES = {200, 201, 202, 400, 404, 409, 413, 422, 429}


@pytest.fixture(scope="module")
def ingest_run(gateway: str) -> str:
    return httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}).json()["id"]


def check(response: httpx.Response) -> None:
    assert response.status_code in OK_STATUSES, (response.status_code, response.text)
    assert "Traceback" not in response.text
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["status"] == response.status_code and problem["detail"]


@PROPERTY_SETTINGS
@given(body=bodies)
def test_post_runs(gateway: str, body: bytes) -> None:
    check(httpx.post(f"{gateway}/v1/runs", content=body))


@PROPERTY_SETTINGS
@given(body=bodies)
def test_steer_and_respond(gateway: str, ingest_run: str, body: bytes) -> None:
    check(httpx.post(f"{gateway}/v1/runs/{ingest_run}/steer", content=body))
    check(httpx.post(f"{gateway}/v1/runs/{ingest_run}/respond", content=body))


@PROPERTY_SETTINGS
@given(lines=st.lists(bodies, max_size=4))
def test_ingest_lines(gateway: str, lines: list[bytes]) -> None:
    run_id = httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}).json()["id"]
    body = b"\n".join(line.replace(b"\n", b" ") for line in lines)
    response = httpx.post(f"{gateway}/v1/runs/{run_id}/events", content=body, params={"end": "1"})
    check(response)
    run = httpx.get(f"{gateway}/v1/runs/{run_id}").json()
    if response.status_code == 200:
        assert run["state"] == "finished"
    else:
        # A rejected line leaves the run open for a corrected retry; the prefix is kept.
        assert run["last_seq"] == response.json()["accepted"]


@PROPERTY_SETTINGS
@given(body=bodies)
def test_agui_post(gateway: str, body: bytes) -> None:
    with httpx.stream("POST", f"{gateway}/agui", content=body, timeout=20) as response:
        response.read()
    if response.status_code == 200:
        events = [line for line in response.text.split("\n") if line.startswith("data: ")]
        assert json.loads(events[-1][6:])["type"] in {"RUN_FINISHED", "RUN_ERROR"}
    else:
        check(response)


def test_websockets_survive_bad_frames(gateway: str) -> None:
    frames: list[Any] = [b"\xff\xfe", "{", "[]", "null", '{"type": 5}', '{"kind": "x y"}', "{}"]
    run_id = httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}).json()["id"]
    with ws_client.connect(gateway.replace("http", "ws") + f"/v1/runs/{run_id}/ingest") as ws:
        for frame in frames:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=5))
            assert reply["type"] == "error" and reply["detail"], reply
        ws.send(json.dumps({"kind": "completion", "data": {"status": "completed"}}))
        assert json.loads(ws.recv(timeout=5))["type"] == "end"
    with ws_client.connect(gateway.replace("http", "ws") + "/agui/ws") as ws:
        for frame in frames:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=5))
            assert reply["type"] == "RUN_ERROR" and reply["code"] == "invalid_input", reply
        ws.send(
            json.dumps(
                {
                    "threadId": "t",
                    "runId": "ws-after-garbage",
                    "messages": [{"id": "m", "role": "user", "content": "plain"}],
                }
            )
        )
        types = []
        while not types or types[-1] not in {"RUN_FINISHED", "RUN_ERROR"}:
            types.append(json.loads(ws.recv(timeout=10))["type"])
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
