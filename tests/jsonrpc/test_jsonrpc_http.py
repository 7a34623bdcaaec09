"""``POST /rpc`` on the real gateway (uvicorn): statuses, limits, a whole run over plain HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonrpcclient import Error, Ok, parse, request

from tests.gateway.harness import running_gateway

MAX_BODY = 32 * 1024
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with (
        running_gateway(scripted_delay_s=0.0, max_body_bytes=MAX_BODY) as (base, _server),
        httpx.Client(base_url=base, timeout=10) as c,
    ):
        yield c


def call(client: httpx.Client, method: str, params: Any = None, **headers: str) -> Any:
    response = client.post("/rpc", json=request(method, params=params), headers=headers)
    assert response.status_code == 200, response.text
    return parse(response.json())


def result(client: httpx.Client, method: str, params: Any = None) -> Any:
    parsed = call(client, method, params)
    assert isinstance(parsed, Ok), parsed
    return parsed.result


def test_statuses(client: httpx.Client) -> None:
    notification = {"jsonrpc": "2.0", "method": "run.list"}
    response = client.post("/rpc", json=[notification, notification])
    assert (response.status_code, response.content) == (204, b"")
    response = client.post("/rpc", content=b"x" * (MAX_BODY + 1), headers=json_type())
    assert response.status_code == 413
    body = response.json()
    assert body["error"]["code"] == -32006 and body["id"] is None
    assert str(MAX_BODY) in body["error"]["data"]["detail"]
    # A batch past max_batch is refused whole, as a body past the limit is: 413, -32006.
    batch = [{"jsonrpc": "2.0", "id": i, "method": "run.list"} for i in range(101)]
    response = client.post("/rpc", json=batch)
    assert response.status_code == 413
    body = response.json()
    assert (body["error"]["code"], body["id"]) == (-32006, None)
    assert body["error"]["data"]["detail"] == "batch has 101 items; the limit is 100"
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"content-type": content_type} if content_type else {}
        response = client.post("/rpc", content=b'{"jsonrpc":"2.0","method":"run.list","id":1}',
                               headers=headers)  # fmt: skip
        assert response.status_code == 415
        assert response.json()["error"]["code"] == -32600
    response = client.post(
        "/rpc",
        content=b'{"jsonrpc":"2.0","method":"run.list","id":1}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200
    assert client.get("/rpc").status_code == 405


def json_type() -> dict[str, str]:
    return {"content-type": "application/json"}


def test_streaming_methods_refused_with_a_pointer(client: httpx.Client) -> None:
    parsed = call(client, "run.subscribe", {"runId": "x"})
    assert isinstance(parsed, Error) and parsed.code == -32004
    assert "run.events" in parsed.data["detail"]


def test_traceparent_header_and_meta(client: httpx.Client) -> None:
    started = call(client, "run.start", {"source": "ingest"}, traceparent=TRACEPARENT)
    assert isinstance(started, Ok)
    info = result(client, "run.get", [started.result["runId"]])
    assert info["metadata"]["traceparent"] == TRACEPARENT


def test_a_run_with_approvals_over_plain_http(client: httpx.Client) -> None:
    """Permission requests arrive as events; run.respond answers them; run.events pages."""
    run_id = result(
        client, "run.start", {"input": "what time is it and what is 6*7?", "approval": "always"}
    )["runId"]
    events: list[dict[str, Any]] = []
    cursor, done = 0, False
    deadline = time.monotonic() + 20
    while not done:
        assert time.monotonic() < deadline, events[-3:]
        page = result(client, "run.events", {"runId": run_id, "after": cursor, "limit": 50})
        for event in page["events"]:
            if event["kind"] == "permission_request":
                answered = result(
                    client,
                    "run.respond",
                    [run_id, event["data"]["requestId"], "allow_once"],
                )
                assert answered["accepted"] is True
        events += page["events"]
        cursor, done = page["cursor"], page["done"]
        if not page["events"]:
            time.sleep(0.01)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["kind"] for e in events]
    assert kinds.count("permission_request") == 2 == kinds.count("permission_result")
    assert events[-1]["data"]["status"] == "completed"
    run = result(client, "run.get", {"runId": run_id})
    assert run["state"] == "finished" and run["lastSeq"] == len(events)
