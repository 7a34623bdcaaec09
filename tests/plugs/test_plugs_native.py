"""Each plug (Python, HTTP, stdio) behind a live gateway, seen through native SSE and
JSON-RPC: the loop's exact events, the request it is given, cancel and steer reaching it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from httpx_sse import connect_sse
from jsonrpcclient import request_json as _request_json
from websockets.asyncio.client import connect

from tests.gateway.sse_client import envelopes, read_stream
from tests.plugs.plugs import PLUGS, plugged_gateway
from tests.plugs.sample_loop import script_for


@pytest.fixture(scope="module", params=PLUGS)
def plugged(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, dict[str, Any]]]:
    with plugged_gateway(request.param) as (base, plug):
        yield request.param, base, plug


pytestmark = pytest.mark.anyio


def request_json(method: str, params: dict[str, Any], id: int) -> dict[str, Any]:
    return json.loads(_request_json(method, params=params, id=id))


def start(base: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{base}/v1/runs", json=body, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()


def loop_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"kind": e["kind"], "data": e["data"]} for e in events]


@pytest.mark.parametrize("prompt", ["hello there loop", "tool please"])
def test_native_sse_carries_the_loops_exact_events(
    plugged: tuple[str, str, dict[str, Any]], prompt: str
) -> None:
    _, base, _ = plugged
    run = start(base, {"input": prompt})
    events = envelopes(read_stream(base, run["id"]))
    assert loop_events(events) == script_for(prompt)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    info = httpx.get(f"{base}/v1/runs/{run['id']}").json()
    assert (info["state"], info["status"]) == ("finished", "completed")


async def test_jsonrpc_websocket_client_streams_the_loops_events(
    plugged: tuple[str, str, dict[str, Any]],
) -> None:
    _, base, _ = plugged
    events: list[dict[str, Any]] = []
    async with connect(base.replace("http://", "ws://") + "/rpc/ws") as ws:
        await ws.send(
            json.dumps(request_json("run.start", {"input": "tool", "subscribe": True}, id=1))
        )
        with anyio.fail_after(20):
            async for raw in ws:
                message = json.loads(raw)
                if message.get("method") == "run.event":
                    events.append(message["params"]["event"])
                elif message.get("method") == "run.end":
                    assert message["params"]["status"] == "completed"
                    break
    assert loop_events(events) == script_for("tool")


def test_the_loop_gets_the_whole_request(plugged: tuple[str, str, dict[str, Any]]) -> None:
    _, base, _ = plugged
    body = {
        "input": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "request now"},
        ],
        "thread_id": "thread-req",
        "config": {"anything": {"goes": True}},
    }
    run = start(base, body)
    events = envelopes(read_stream(base, run["id"]))
    seen = json.loads(events[0]["data"]["delta"])
    assert seen == {
        "run_id": run["id"],
        "thread_id": "thread-req",
        "input": "request now",
        "messages": [["system", "be brief"], ["user", "first"], ["assistant", "ok"]],
        "tools": [],
        "config": {"anything": {"goes": True}},
    }


def follow_until(base: str, run_id: str, predicate: Any) -> Iterator[dict[str, Any]]:
    with (
        httpx.Client(base_url=base, timeout=20) as client,
        connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
    ):
        for sse in source.iter_sse():
            env = json.loads(sse.data)
            yield env
            if predicate(env):
                return


def slow_run(base: str, react: Any) -> list[dict[str, Any]]:
    """Start the loop's endless "slow" scenario and follow it to its end, letting
    ``react(envelope, command)`` send commands (``command("cancel")``) as events arrive."""
    run_id = start(base, {"input": "slow words"})["id"]

    def command(verb: str, **body: Any) -> dict[str, Any]:
        answer = httpx.post(f"{base}/v1/runs/{run_id}/{verb}", json=body).json()
        assert answer["accepted"] is True, answer
        return answer

    seen = []
    for env in follow_until(base, run_id, lambda e: e["kind"] == "completion"):
        seen.append(env)
        react(env, command)
    return seen


def first_word(env: dict[str, Any]) -> bool:
    return env["kind"] == "content_delta" and env["data"]["delta"] == "w0 "


def test_cancel_reaches_the_loop(plugged: tuple[str, str, dict[str, Any]]) -> None:
    _, base, _ = plugged

    def react(env: dict[str, Any], command: Any) -> None:
        if first_word(env):
            command("cancel")

    seen = slow_run(base, react)
    # The loop itself ended the run: it saw the cancel.
    assert seen[-1]["data"] == {"status": "cancelled", "reason": "the loop saw the cancel"}


def test_steer_reaches_the_loop(plugged: tuple[str, str, dict[str, Any]]) -> None:
    _, base, _ = plugged

    def react(env: dict[str, Any], command: Any) -> None:
        if first_word(env):
            command("steer", content="go left")
        if env["kind"] == "steer":
            command("cancel")

    seen = slow_run(base, react)
    steers = [e["data"] for e in seen if e["kind"] == "steer"]
    assert steers == [{"content": "go left", "round": 1}]
    assert any(e["data"].get("delta") == "[steered: go left] " for e in seen)


def test_an_over_long_steering_message_is_refused_before_the_loop(
    plugged: tuple[str, str, dict[str, Any]],
) -> None:
    _, base, _ = plugged
    run = start(base, {"input": "slow words", "config": {"max_steer_chars": 10}})
    try:
        # Once the loop streams, it is live.
        for _ in follow_until(base, run["id"], lambda e: e["kind"] == "content_delta"):
            pass
        answer = httpx.post(f"{base}/v1/runs/{run['id']}/steer", json={"content": "x" * 11})
        assert answer.status_code == 422
        assert "limit is 10" in answer.json()["detail"]
    finally:
        httpx.post(f"{base}/v1/runs/{run['id']}/cancel")
