"""The multitask strategies across two gateway processes on one real redis-server: the run
going on a thread is on instance A, the start that names a strategy comes to instance B. The
strategies only use the run service (adapters/shared/multitask.py), so B cancels and waits for
A's run through Redis as it would for its own.

And a run's webhook there: the run is on A, B follows it to its end and cancels it; only A
(the run's owner) POSTs, once. The two instances serve both tests (each takes seconds to
start)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
import pytest

from tests.gateway.multitask_support import slow_run as slow_http_run
from tests.gateway.webhook_receiver import Receiver, receiving
from tests.redis.test_instances import bases, instances

DEADLINE_S = 30.0


def slow_run(host: str, thread: str) -> str:
    """A run on ``thread`` that goes on until cancelled, once its tool call is out."""
    with httpx.Client(base_url=host, timeout=DEADLINE_S) as http:
        run_id: str = slow_http_run(http, thread)["id"]
        return run_id


def start(host: str, thread: str, strategy: str) -> httpx.Response:
    body = {"input": "what did i say", "thread_id": thread, "multitask_strategy": strategy}
    return httpx.post(f"{host}/v1/runs", json=body, timeout=DEADLINE_S)


def status(host: str, run_id: str) -> Any:
    return httpx.get(f"{host}/v1/runs/{run_id}", timeout=DEADLINE_S).json()["status"]


class Pair(NamedTuple):
    a: str
    b: str
    hooks: str  # a webhook receiver's base URL
    receiver: Receiver


@pytest.fixture(scope="module")
def pair(redis_server: str) -> Iterator[Pair]:
    """Instances A and B on a key prefix of this module's own, and a webhook receiver."""
    sep = "&" if "?" in redis_server else "?"
    url = f"{redis_server}{sep}prefix=t{uuid.uuid4().hex[:12]}"
    with receiving() as (hooks, receiver), instances(url, 2, "--thread-wait", "20") as procs:
        a, b = bases(procs)
        yield Pair(a, b, hooks, receiver)


def test_strategies_reach_a_run_on_another_instance(pair: Pair) -> None:
    a, b = pair.a, pair.b
    slow = slow_run(a, "shared-reject")
    refused = start(b, "shared-reject", "reject")
    assert refused.status_code == 409 and slow in refused.json()["detail"]
    assert status(a, slow) is None  # still going
    httpx.post(f"{b}/v1/runs/{slow}/cancel", timeout=DEADLINE_S)

    for strategy in ("interrupt", "rollback"):
        thread = f"shared-{strategy}"
        slow = slow_run(a, thread)
        answer = start(b, thread, strategy)
        assert answer.status_code == 201, answer.text
        assert status(b, slow) == "cancelled"
        sent = answer.json()["input"]
        assert sent[-1] == {"role": "user", "content": "what did i say"}
        if strategy == "interrupt":  # the cancelled run's output stays in the thread
            assert sent[0] == {"role": "user", "content": "slow tool"} and len(sent) > 2
        else:  # left out: the thread as it was before it (empty here)
            assert sent == [{"role": "user", "content": "what did i say"}]

    slow = slow_run(a, "shared-enqueue")
    answers: list[httpx.Response] = []
    waiter = threading.Thread(target=lambda: answers.append(start(b, "shared-enqueue", "enqueue")))
    waiter.start()
    # Still refused while the slow run goes: the queued start has not taken the thread.
    assert start(b, "shared-enqueue", "reject").status_code == 409
    httpx.post(f"{a}/v1/runs/{slow}/cancel", timeout=DEADLINE_S)
    waiter.join(DEADLINE_S)
    assert answers and answers[0].status_code == 201, answers and answers[0].text
    assert answers[0].json()["input"][0] == {"role": "user", "content": "slow tool"}


def follow_to_end(base: str, run_id: str, kinds: list[str], in_tool: threading.Event) -> None:
    """The run's events as ``base`` serves them, to its terminal one; ``in_tool`` is set once
    its tool call is out (the run is going, and followed live)."""
    with httpx.stream("GET", f"{base}/v1/runs/{run_id}/events", timeout=DEADLINE_S) as events:
        for line in events.iter_lines():
            if line.startswith("data:"):
                kinds.append(json.loads(line[5:])["kind"])
                if kinds[-1] == "tool_call_start":
                    in_tool.set()


def test_only_the_owner_sends_the_webhook_once(pair: Pair) -> None:
    a, b, hooks, receiver = pair
    body = {"input": "slow tool", "webhook": f"{hooks}/hook/shared-1"}
    started = httpx.post(f"{a}/v1/runs", json=body, timeout=DEADLINE_S)
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    kinds: list[str] = []
    in_tool = threading.Event()
    watcher = threading.Thread(target=follow_to_end, args=(b, run_id, kinds, in_tool))
    watcher.start()
    assert in_tool.wait(DEADLINE_S), kinds
    # B forwards the cancel to A, which ends the run; B's view of it ends with it.
    httpx.post(f"{b}/v1/runs/{run_id}/cancel", timeout=DEADLINE_S)
    watcher.join(DEADLINE_S)
    assert kinds and kinds[-1] == "completion"
    sent = receiver.delivered("shared-1")
    assert (sent["id"], sent["status"]) == (run_id, "cancelled")
    # A later run's webhook, from B, arrives after it: still one POST for the first.
    later = {"input": "plain hi", "webhook": f"{hooks}/hook/shared-2"}
    assert httpx.post(f"{b}/v1/runs", json=later, timeout=DEADLINE_S).status_code == 201
    receiver.delivered("shared-2")
    assert receiver.tries("shared-1") == [200]
