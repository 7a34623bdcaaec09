"""The multitask strategies across two gateway processes on one real redis-server: the run
going on a thread is on instance A, the start that names a strategy comes to instance B. The
strategies only use the run service (adapters/shared/multitask.py), so B cancels and waits for
A's run through Redis as it would for its own."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.gateway.test_multitask import slow_run as slow_http_run
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


def test_strategies_reach_a_run_on_another_instance(redis_url: str) -> None:
    with instances(redis_url, 2, "--thread-wait", "20") as procs:
        a, b = bases(procs)

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
        waiter = threading.Thread(
            target=lambda: answers.append(start(b, "shared-enqueue", "enqueue"))
        )
        waiter.start()
        # Still refused while the slow run goes: the queued start has not taken the thread.
        assert start(b, "shared-enqueue", "reject").status_code == 409
        httpx.post(f"{a}/v1/runs/{slow}/cancel", timeout=DEADLINE_S)
        waiter.join(DEADLINE_S)
        assert answers and answers[0].status_code == 201, answers and answers[0].text
        assert answers[0].json()["input"][0] == {"role": "user", "content": "slow tool"}
