"""What the multitask_strategy tests of every front end share: a run that goes on until it is
cancelled (the scripted model's "slow tool", a 30 s sleep), reading runs back through the
native API, and a start made in a thread of its own (one that waits for its thread's turn)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

from tests.waiting import wait_until

T = TypeVar("T")
counter = iter(range(1_000_000))


def fresh_thread() -> str:
    return f"mt-thread-{next(counter)}"


def start(http: httpx.Client, body: dict[str, Any], status: int = 201) -> dict[str, Any]:
    response = http.post("/v1/runs", json=body)
    assert response.status_code == status, response.text
    answer: dict[str, Any] = response.json()
    return answer


def run_of(http: httpx.Client, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = http.get(f"/v1/runs/{run_id}").json()
    return found


def runs_on(http: httpx.Client, thread_id: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = http.get("/v1/runs", params={"thread_id": thread_id}).json()[
        "runs"
    ]
    return runs


def ended(http: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run once it has finished."""
    return wait_until(
        lambda: (run := run_of(http, run_id))["state"] == "finished" and run,
        20,
        f"run {run_id} to end",
    )


def slow_run(http: httpx.Client, thread_id: str) -> dict[str, Any]:
    """A run that goes on until cancelled, once it is in its tool (its call is out)."""
    run = start(http, {"input": "slow tool", "thread_id": thread_id})
    with http.stream("GET", f"/v1/runs/{run['id']}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("data:") and json.loads(line[5:])["kind"] == "tool_call_start":
                return run
    raise AssertionError("the slow run ended before its tool call")


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def after_slow(run: dict[str, Any], prompt: str) -> bool:
    """The run started from the slow run's conversation (its prompt and tool call), then
    ``prompt``: it went on from where the slow run ended."""
    given = run["input"]
    return (
        given[0] == {"role": "user", "content": "slow tool"}
        and given[1]["tool_calls"][0]["name"] == "sleep"
        and given[-1] == {"role": "user", "content": prompt}
    )


@contextmanager
def in_background(call: Callable[[], T]) -> Iterator[list[T]]:
    """``call`` in a thread of its own; what it returned is in the list once the block ends."""
    out: list[T] = []
    worker = threading.Thread(target=lambda: out.append(call()))
    worker.start()
    try:
        yield out
    finally:
        worker.join(30)
    assert out, "the background call did not return"
