"""One run at a time on a thread, across instances (issue 33, R8).

A prompt on a thread is refused (409) while the thread's latest run goes. That check was a
look-up: two prompts on one thread sent to two instances at the same moment both found the
thread idle and both started (20 of 20 trials). The thread is now claimed in Redis for the
run, and released when it ends: of two at once, exactly one starts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import redis

from tests.redis.test_instances import bases, instances

TRIALS = 5
DEADLINE_S = 30.0


def start_together(hosts: list[str], path: str, body: dict[str, Any]) -> list[httpx.Response]:
    """The same start sent to each host at once (each from a connection already open)."""
    clients = [httpx.Client(base_url=h, timeout=DEADLINE_S) for h in hosts]
    for client in clients:
        assert client.get("/healthz").status_code == 200  # connected before the barrier
    barrier = threading.Barrier(len(hosts))
    answers: list[httpx.Response | None] = [None] * len(hosts)

    def send(i: int) -> None:
        barrier.wait()
        answers[i] = clients[i].post(path, json=body)

    senders = [threading.Thread(target=send, args=(i,)) for i in range(len(hosts))]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(DEADLINE_S)
    for client in clients:
        client.close()
    assert all(a is not None for a in answers)
    return [a for a in answers if a is not None]


def native(hosts: list[str], thread: str) -> tuple[int, str, str]:
    """Two ``POST /v1/runs`` at once: (the one that started, its run, the other's refusal)."""
    # reject: by default the second would wait its turn (enqueue) instead of being refused.
    body = {"input": "slow tool", "thread_id": thread, "multitask_strategy": "reject"}
    answers = start_together(hosts, "/v1/runs", body)
    assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
    won = next(i for i, a in enumerate(answers) if a.status_code == 201)
    refused = answers[1 - won].json()
    assert refused["status"] == 409 and refused["title"] == "Conflict"
    return won, answers[won].json()["id"], refused["detail"]


def jsonrpc(hosts: list[str], thread: str) -> tuple[int, str, str]:
    """Two ``run.start`` at once: one result, one NOT_ACCEPTED naming the thread and run."""
    # reject, as for native: without it the second would wait its turn.
    call = {"input": "slow tool", "threadId": thread, "multitaskStrategy": "reject"}
    answers = start_together(
        hosts, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "run.start", "params": call}
    )
    replies = [a.json() for a in answers]
    assert sorted("result" in r for r in replies) == [False, True], replies
    won = next(i for i, r in enumerate(replies) if "result" in r)
    run_id = replies[won]["result"]["runId"]
    error = replies[1 - won]["error"]
    assert error["code"] == -32007 and error["message"] == "Not accepted"
    assert error["data"]["threadId"] == thread and error["data"]["runId"] == run_id
    return won, run_id, error["data"]["detail"]


def wait_finished(host: str, run_id: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while httpx.get(f"{host}/v1/runs/{run_id}").json()["state"] != "finished":
        assert time.monotonic() < deadline, f"run {run_id} never finished"
        time.sleep(0.05)


@pytest.mark.parametrize("front", [native, jsonrpc])
def test_two_prompts_on_one_thread_at_once_on_two_instances_start_one_run(
    redis_url: str, front: Callable[[list[str], str], tuple[int, str, str]]
) -> None:
    with instances(redis_url, 2) as procs:
        hosts = bases(procs)
        for trial in range(TRIALS):
            thread = f"thread-{trial}"
            # The thread has a run already (ended), so each prompt continues it.
            first = httpx.post(f"{hosts[0]}/v1/runs", json={"input": "plain", "thread_id": thread})
            wait_finished(hosts[0], first.json()["id"])
            won, winner, refusal = front(hosts, thread)
            assert thread in refusal and winner in refusal and "still going" in refusal
            # Once it ends, the thread takes its next run, on either instance.
            at, other = hosts[won], hosts[1 - won]
            assert httpx.post(f"{at}/v1/runs/{winner}/cancel").json()["accepted"] is True
            wait_finished(other, winner)
            after = httpx.post(f"{other}/v1/runs", json={"input": "plain", "thread_id": thread})
            assert after.status_code == 201, after.text
            wait_finished(other, after.json()["id"])


def test_a_claim_lives_as_long_as_its_run_and_its_owner(redis_url: str, redis_server: str) -> None:
    """Renewed with the instance's lease while the run goes; freed when a survivor ends the
    run of an instance that died."""
    prefix = parse_qs(urlsplit(redis_url).query)["prefix"][0]
    server = redis.Redis.from_url(redis_server)
    # Its run is not resumed elsewhere (tests/redis/test_takeover.py): a survivor ends it.
    with instances(redis_url + "&lease=1", 2, env={"LOOPGATE_MAX_RUN_ATTEMPTS": "1"}) as procs:
        (a, proc_a), (b, _) = procs
        started = httpx.post(f"{a}/v1/runs", json={"input": "slow tool", "thread_id": "held"})
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        claim = f"{prefix}:thread-claim:held"
        # Three leases go by: the claim is there throughout, renewed.
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            assert server.get(claim) == run_id.encode()
            time.sleep(0.05)
        proc_a.kill()
        proc_a.wait()
        # B ends the dead instance's run, and with it frees the thread.
        wait_finished(b, run_id)
        assert httpx.get(f"{b}/v1/runs/{run_id}").json()["status"] == "failed"
        assert server.get(claim) is None
        after = httpx.post(f"{b}/v1/runs", json={"input": "plain", "thread_id": "held"})
        assert after.status_code == 201, after.text
        wait_finished(b, after.json()["id"])
        assert server.get(claim) is None
