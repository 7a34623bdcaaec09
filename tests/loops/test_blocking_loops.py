"""A Python ``--loop`` that blocks (``time.sleep``) in a real ``loopgate serve``: on the event
loop the stall watchdog names the loop and the run in the log, once per stall; with
``--loop-runner thread`` the gateway goes on answering while the loop sleeps, and the run
completes with the same events."""

from __future__ import annotations

import json
import time

import httpx
from httpx_sse import connect_sse

from tests.gateway.harness import gateway_process, stop
from tests.gateway.sse_client import envelopes, read_stream

HOSTILE = "tests.loops.hostile_loops:hostile"
LOOP_NAME = f"python:{HOSTILE}"
BLOCK_S = 3.0
EVENTS = ["stage_start", "content_delta", "completion"]


def start(base: str, prompt: str) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=10)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def test_a_blocking_loop_on_the_event_loop_is_named_in_one_warning_per_stall() -> None:
    env = {"LOOPGATE_STALL_WARNING_S": "0.5"}
    args = ("--loop", HOSTILE, "--log-level", "warning")
    with gateway_process(*args, env=env) as (base, proc):
        first = start(base, f"block {BLOCK_S}")
        assert [e["kind"] for e in envelopes(read_stream(base, first))] == EVENTS
        # A second stall within a minute of the first is counted, not logged.
        second = start(base, "block 1")
        assert [e["kind"] for e in envelopes(read_stream(base, second))] == EVENTS
        stop(proc)
        assert proc.stderr is not None
        log = proc.stderr.read().decode()
    warnings = [line for line in log.splitlines() if line.startswith("WARNING:loopgate.stall")]
    assert len(warnings) == 1, log
    (warning,) = warnings
    assert f"the loop {LOOP_NAME} is blocking it in run {first}" in warning
    assert "hostile_loops.py" in warning and "in hostile" in warning
    assert "--loop-runner thread" in warning
    assert "Traceback" not in log


def test_a_blocking_loop_in_a_thread_leaves_the_gateway_answering() -> None:
    env = {"LOOPGATE_STALL_WARNING_S": "0.5"}
    args = ("--loop", HOSTILE, "--loop-runner", "thread", "--log-level", "warning")
    with (
        gateway_process(*args, env=env) as (base, proc),
        httpx.Client(base_url=base, timeout=20) as client,
    ):
        run_id = start(base, f"block {BLOCK_S}")
        kinds = []
        with connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
            for sse in source.iter_sse():
                kinds.append(sse.event or "message")
                if len(kinds) == 1:
                    # The loop sleeps from right after its first event.
                    began = time.monotonic()
                    health = client.get("/healthz", timeout=BLOCK_S)
                    answered_in = time.monotonic() - began
                    run = client.get(f"/v1/runs/{run_id}").json()
        assert health.status_code == 200
        assert answered_in < 1.0, answered_in
        assert run["state"] == "running"
        events = envelopes(read_stream(base, run_id))
        stop(proc)
        assert proc.stderr is not None
        log = proc.stderr.read().decode()
    assert [e["kind"] for e in events] == EVENTS
    assert events[1]["data"] == {"delta": "woke up"}
    assert events[2]["data"] == {"status": "completed", "reason": "stop"}
    assert "loopgate.stall" not in log, log


def test_a_blocked_thread_does_not_hold_its_cancelled_run() -> None:
    # The loop sleeps through the cancel: past the grace the gateway ends the run itself, and
    # leaves the thread to finish its sleep on its own.
    env = {"LOOPGATE_LOOP_CANCEL_GRACE_S": "0.5"}
    args = ("--loop", HOSTILE, "--loop-runner", "thread", "--log-level", "warning")
    with (
        gateway_process(*args, env=env) as (base, proc),
        httpx.Client(base_url=base, timeout=20) as client,
    ):
        run_id = start(base, f"block {BLOCK_S * 2}")
        seen = []
        with connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
            for sse in source.iter_sse():
                seen.append(json.loads(sse.data))
                if len(seen) == 1:
                    began = time.monotonic()
                    assert client.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        ended_in = time.monotonic() - began
        again = start(base, "block 0")
        events = envelopes(read_stream(base, again))
        stop(proc)
        assert proc.stderr is not None
        log = proc.stderr.read().decode()
    assert [e["kind"] for e in seen] == ["stage_start", "completion"]
    assert seen[-1]["data"] == {"status": "cancelled", "reason": "cancelled"}
    assert ended_in < BLOCK_S, ended_in
    assert [e["kind"] for e in events] == EVENTS
    assert "Traceback" not in log, log
