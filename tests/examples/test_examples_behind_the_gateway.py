"""The examples of docs/loops.md served by a live gateway as the docs say: the pydantic-ai
agent through --loop, the plain-Python loop through --loop-url and through --loop-cmd."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import httpx
from httpx_sse import connect_sse

from tests.agui.node_client import clean
from tests.examples.support import HttpLoop
from tests.gateway.harness import REPO, running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.node_clients import run_script

EXAMPLES = REPO / "examples"
LONG = " ".join(f"w{i}" for i in range(60))


def run_events(base: str, prompt: str) -> list[dict[str, Any]]:
    run = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=10).json()
    return envelopes(read_stream(base, run["id"]))


def answer(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")


def test_the_pydantic_ai_agent_through_loop() -> None:
    with running_gateway(loop="examples.pydantic_ai_agent:loop") as (base, _):
        events = run_events(base, "What time is it, and what is 25 * 16 + 2?")
        seen = run_script("agui-plug.mjs", base, "text", "--prompt", "What is 6 * 7?")
    tools = [e["data"]["name"] for e in events if e["kind"] == "tool_call_start"]
    assert sorted(tools) == ["calculate", "clock"]
    assert "402" in answer(events)
    assert events[-1]["data"]["status"] == "completed"
    run = clean(seen["text"])
    starts = [e["toolCallName"] for e in run["events"] if e["type"] == "TOOL_CALL_START"]
    assert starts == ["calculate"]
    text = "".join(e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "42" in text and run["terminal"]["type"] == "RUN_FINISHED"


def steer_then_cancel(base: str) -> list[dict[str, Any]]:
    """A long answer, steered at its first word and cancelled once the loop applied it."""
    run_id = httpx.post(f"{base}/v1/runs", json={"input": LONG}).json()["id"]
    seen: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=base, timeout=20) as client,
        connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
    ):
        for sse in source.iter_sse():
            env = json.loads(sse.data)
            seen.append(env)
            if env["kind"] == "content_delta" and len(answer(seen)) == len(env["data"]["delta"]):
                reply = client.post(f"/v1/runs/{run_id}/steer", json={"content": "be brief"})
                assert reply.json()["accepted"] is True
            if env["kind"] == "steer":
                assert client.post(f"/v1/runs/{run_id}/cancel").json()["accepted"] is True
    return seen


def check_toy_run(events: list[dict[str, Any]]) -> None:
    assert [e["kind"] for e in events[:5]] == [
        "stage_start",
        "reasoning_delta",
        "tool_call_start",
        "tool_call_result",
        "completion",
    ]
    assert answer(events) == "You wrote 2 words: hello loop"
    assert events[-1]["data"]["status"] == "completed"


def test_the_plain_loop_through_loop_url(http_loop: HttpLoop) -> None:
    with running_gateway(loop_url=http_loop.url) as (base, _):
        check_toy_run(run_events(base, "hello loop"))
        steered = steer_then_cancel(base)
    assert [e["data"]["content"] for e in steered if e["kind"] == "steer"] == ["be brief"]
    assert steered[-1]["data"]["status"] == "cancelled"


def test_the_plain_loop_through_loop_cmd() -> None:
    command = shlex.join([sys.executable, str(EXAMPLES / "plain_stdio_loop.py")])
    with running_gateway(loop_cmd=command) as (base, _):
        check_toy_run(run_events(base, "hello loop"))
        steered = steer_then_cancel(base)
    assert [e["data"]["content"] for e in steered if e["kind"] == "steer"] == ["be brief"]
    assert steered[-1]["data"]["status"] == "cancelled"
