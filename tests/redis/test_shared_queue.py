"""The run queue shared through Redis, with roles (docs/scale.md: roles and the run queue): an
``api`` instance accepts runs into the queue and runs none; a ``worker`` (room for one run
here) takes them, in order, and owns them from then on. Real ``loopgate serve`` processes on
one real redis-server; the reference loop's scripted model runs the runs."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, Any

import httpx
import pytest

from tests.gateway.harness import REPO
from tests.gateway.sse_client import envelopes, read_stream
from tests.redis.test_instances import bases, instances

DEADLINE_S = 30.0
QUEUED = 2  # max_queued_runs of the pair


class Pair:
    """``taker``: the arguments of tests.redis.queue_taker for a taker on the pair's journal,
    with a lease of a second."""

    def __init__(self, api: str, worker: str, taker: list[str], worker_log: IO[bytes]) -> None:
        self.api, self.worker, self.taker = api, worker, taker
        self.worker_log = worker_log

    def logged(self) -> str:
        """What the worker has logged so far."""
        self.worker_log.seek(0)
        return self.worker_log.read().decode()


@contextmanager
def roles(journal: str, taker: list[str], *flags: str) -> Iterator[Pair]:
    """An api instance and a worker with room for one run, on ``journal`` (and ``flags``)."""
    limits = ("--max-queued-runs", str(QUEUED), *flags)
    logs: list[IO[bytes]] = []
    with ExitStack() as stack:
        api = stack.enter_context(instances(journal, 1, "--role", "api", *limits))
        worker = stack.enter_context(
            instances(
                journal, 1, "--role", "worker", "--max-active-runs", "1", *limits, log_files=logs
            )
        )
        yield Pair(bases(api)[0], bases(worker)[0], taker, logs[0])


@pytest.fixture(scope="module")
def pair(redis_server: str) -> Iterator[Pair]:
    """The pair on a Redis journal of their own prefix."""
    sep = "&" if "?" in redis_server else "?"
    url = f"{redis_server}{sep}prefix=t{uuid.uuid4().hex[:12]}"
    with roles(url, [f"{url}&lease=1"]) as pair:
        yield pair


def start(base: str, prompt: str) -> dict[str, Any]:
    answer = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=DEADLINE_S)
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def info(base: str, run_id: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{base}/v1/runs/{run_id}", timeout=DEADLINE_S).json()
    return body


def events(base: str, run_id: str) -> list[dict[str, Any]]:
    return envelopes(read_stream(base, run_id, timeout=DEADLINE_S))


def busy(base: str) -> str:
    """A run that holds the worker until cancelled, once its tool call is out."""
    run = start(base, "slow tool")
    with httpx.stream("GET", f"{base}/v1/runs/{run['id']}/events", timeout=DEADLINE_S) as sse:
        for line in sse.iter_lines():
            if line.startswith("data:") and '"tool_call_start"' in line:
                return str(run["id"])
    raise AssertionError("the slow run ended before its tool call")


def cancel(base: str, run_id: str) -> dict[str, Any]:
    answer = httpx.post(f"{base}/v1/runs/{run_id}/cancel", timeout=DEADLINE_S)
    assert answer.status_code in (200, 202), answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_run_started_on_the_api_instance_runs_on_the_worker(pair: Pair) -> None:
    api, worker = pair.api, pair.worker
    run = start(api, "hello")
    # The api instance runs nothing: every run it accepts waits for a worker first.
    assert run["state"] == "queued" and run["queue_position"] == 1
    on_api = events(api, run["id"])
    assert [e["seq"] for e in on_api] == list(range(1, len(on_api) + 1))
    assert on_api[-1]["kind"] == "completion" and on_api[-1]["data"]["status"] == "completed"
    assert [e["kind"] for e in on_api].count("completion") == 1
    assert events(worker, run["id"]) == on_api
    assert info(api, run["id"])["state"] == "finished"
    # An external loop's run is not queued: its events come from where it pushes them.
    ingest = httpx.post(f"{api}/v1/runs", json={"source": "ingest"}, timeout=DEADLINE_S)
    assert ingest.status_code == 201 and ingest.json()["state"] == "running"


def test_runs_past_the_workers_room_wait_in_order_and_a_full_queue_is_429(pair: Pair) -> None:
    slow = busy(pair.api)
    api, worker = pair.api, pair.worker
    first = start(api, "hello")
    # Past its own room, a start sent to the worker waits in the same queue.
    second = start(worker, "think")
    assert (first["queue_position"], second["queue_position"]) == (1, 2)
    for base in (api, worker):
        seen = [info(base, r["id"]) for r in (first, second)]
        assert [(i["state"], i["queue_position"]) for i in seen] == [("queued", 1), ("queued", 2)]
    full = httpx.post(f"{api}/v1/runs", json={"input": "hello"}, timeout=DEADLINE_S)
    assert full.status_code == 429 and "queue is full" in full.json()["detail"]

    cancel(api, slow)
    ran = [events(api, r["id"]) for r in (first, second)]
    assert [r[-1]["data"]["status"] for r in ran] == ["completed", "completed"]
    # One run at a time on the worker, oldest first: the second began after the first ended.
    assert ran[1][0]["ts"] > ran[0][-1]["ts"]


def test_a_queued_run_cancelled_ends_cancelled_once_and_never_runs(pair: Pair) -> None:
    api, worker = pair.api, pair.worker
    slow = busy(api)
    waiting = start(api, "hello")
    answer = cancel(worker, waiting["id"])
    assert answer["accepted"] is True
    again = cancel(api, waiting["id"])
    assert again["accepted"] is False  # ended already: a no-op
    cancel(api, slow)
    # The worker is free again and takes what comes next; the cancelled run stays as it ended.
    after = start(api, "hello")
    assert events(api, after["id"])[-1]["data"]["status"] == "completed"
    ended = events(api, waiting["id"])
    assert [(e["seq"], e["kind"], e["data"]["status"]) for e in ended] == [
        (1, "completion", "cancelled")
    ]
    assert info(worker, waiting["id"])["status"] == "cancelled"


def test_a_run_whose_taker_is_killed_before_it_starts_is_taken_again(pair: Pair) -> None:
    api = pair.api
    slow = busy(api)  # the worker has no room: the taker below takes the next run
    taker = subprocess.Popen(
        [sys.executable, "-m", "tests.redis.queue_taker", *pair.taker],
        cwd=REPO,
        env=os.environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert taker.stdout is not None
        assert taker.stdout.readline().strip() == b"ready"
        run = start(api, "hello")
        assert taker.stdout.readline().strip().decode() == run["id"]
        taker.kill()
        taker.wait(DEADLINE_S)
    finally:
        if taker.poll() is None:
            taker.kill()
            taker.wait(DEADLINE_S)
    # Its lease lapses (a second); the worker, free again, puts the run back and runs it.
    cancel(api, slow)
    ran = events(api, run["id"])
    assert [e["kind"] for e in ran].count("completion") == 1
    assert ran[-1]["data"]["status"] == "completed"
    assert f"run {run['id']}: its taker is gone; queued again" in pair.logged()
    assert info(api, run["id"])["state"] == "finished"


@pytest.mark.parametrize("journal", ["memory", "sqlite:runs.db"])
def test_an_api_instance_without_a_shared_journal_is_refused_at_start(
    journal: str, tmp_path: Any
) -> None:
    serve = [sys.executable, "-m", "loopgate", "serve", "--role", "api", "--journal", journal]
    done = subprocess.run(serve, cwd=tmp_path, capture_output=True, timeout=DEADLINE_S)
    assert done.returncode == 2
    assert b"role api needs a journal the instances share" in done.stderr
    assert b"Traceback" not in done.stderr
