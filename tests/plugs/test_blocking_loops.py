"""A Python ``--loop`` that blocks (``time.sleep``) in a real ``loopgate serve``: on the event
loop the stall watchdog names the loop and the run in the log, once per stall; with
``--loop-runner thread`` the gateway goes on answering while the loop sleeps, the run completes
with the same events, and a cancel past its grace ends the run without waiting for the thread."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from tests.gateway.harness import REPO, gateway_process, stop
from tests.gateway.sse_client import envelopes, read_stream

HOSTILE = "tests.plugs.hostile_loops:hostile"
LOOP_NAME = f"python:{HOSTILE}"
BLOCK_S = 3.0
EVENTS = ["stage_start", "content_delta", "completion"]


class Served:
    """A gateway process serving the hostile loop; ``log`` is its stderr once stopped."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.client = httpx.Client(base_url=base, timeout=20)
        self.log = ""

    def start(self, prompt: str) -> str:
        response = self.client.post("/v1/runs", json={"input": prompt})
        assert response.status_code == 201, response.text
        run_id: str = response.json()["id"]
        return run_id

    def kinds(self, run_id: str) -> list[str]:
        return [e["kind"] for e in envelopes(read_stream(self.base, run_id))]


@contextmanager
def serving(runner: str, **env: str) -> Iterator[Served]:
    args = ("--loop", HOSTILE, "--loop-runner", runner, "--log-level", "warning")
    with gateway_process(*args, env=env) as (base, proc):
        served = Served(base)
        try:
            yield served
        finally:
            served.client.close()
            stop(proc)
            assert proc.stderr is not None
            served.log = proc.stderr.read().decode()


def until_first_event(served: Served, run_id: str) -> Iterator[dict[str, Any]]:
    """The run's events as they come; the caller acts on the first while the loop sleeps."""
    with connect_sse(served.client, "GET", f"/v1/runs/{run_id}/events") as source:
        for sse in source.iter_sse():
            yield json.loads(sse.data)


def test_a_blocking_loop_on_the_event_loop_is_named_in_one_warning_per_stall() -> None:
    with serving("event_loop", LOOPGATE_STALL_WARNING_S="0.5") as served:
        first = served.start(f"block {BLOCK_S}")
        assert served.kinds(first) == EVENTS
        second = served.start("block 1")
        assert served.kinds(second) == EVENTS
    warnings = [line for line in served.log.splitlines() if "loopgate.stall" in line]
    for run_id in (first, second):
        # Once per stall, however long it lasts (3 s here: a dozen of the watchdog's looks).
        (warning,) = [w for w in warnings if run_id in w]
        assert warning.startswith("WARNING:loopgate.stall:the event loop has not run for ")
        assert f"the loop {LOOP_NAME} is blocking it in run {run_id}" in warning
        assert "hostile_loops.py" in warning and "in hostile" in warning
        assert "--loop-runner thread" in warning
    assert "Traceback" not in served.log


def test_a_blocking_loop_in_a_thread_leaves_the_gateway_answering() -> None:
    with serving("thread", LOOPGATE_STALL_WARNING_S="0.5") as served:
        run_id = served.start(f"block {BLOCK_S}")
        for event in until_first_event(served, run_id):
            if event["seq"] == 1:  # the loop sleeps from right after its first event
                began = time.monotonic()
                health = served.client.get("/healthz", timeout=BLOCK_S)
                answered_in = time.monotonic() - began
                run = served.client.get(f"/v1/runs/{run_id}").json()
        events = envelopes(read_stream(served.base, run_id))
    assert health.status_code == 200
    assert answered_in < 1.0, answered_in
    assert run["state"] == "running"  # answered while the loop slept, not after
    assert [e["kind"] for e in events] == EVENTS
    assert events[1]["data"] == {"delta": "woke up"}
    assert events[2]["data"] == {"status": "completed", "reason": "stop"}
    assert "loopgate.stall" not in served.log, served.log


def test_a_blocked_thread_does_not_hold_its_cancelled_run() -> None:
    # The loop sleeps through the cancel: past the grace the gateway ends the run itself, and
    # leaves the thread to finish its sleep on its own.
    with serving("thread", LOOPGATE_LOOP_CANCEL_GRACE_S="0.5") as served:
        run_id = served.start(f"block {BLOCK_S * 2}")
        seen = []
        for event in until_first_event(served, run_id):
            seen.append(event)
            if event["seq"] == 1:
                began = time.monotonic()
                assert served.client.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        ended_in = time.monotonic() - began
        assert served.kinds(served.start("block 0")) == EVENTS
    assert [e["kind"] for e in seen] == ["stage_start", "completion"]
    assert seen[-1]["data"] == {"status": "cancelled", "reason": "cancelled"}
    assert ended_in < BLOCK_S, ended_in
    assert "Traceback" not in served.log, served.log


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("--loop-runner", "thread"),
            "loopgate serve: --loop-runner thread runs a Python --loop; none is given",
        ),
        (
            ("--loop", "tests.plugs.hostile_loops:AN_AGENT_LOOP", "--loop-runner", "thread"),
            "loopgate serve: tests.plugs.hostile_loops:AN_AGENT_LOOP is an AgentLoop object: "
            "--loop-runner thread runs async generator functions (and factories of them) only",
        ),
    ],
)
def test_a_thread_runner_with_nothing_to_run_in_it_stops_the_gateway_at_start(
    args: tuple[str, ...], said: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopgate", "serve", "--port", "1", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == said
