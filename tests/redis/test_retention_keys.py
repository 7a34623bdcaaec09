"""Retention removes every key of the runs it drops (issue 33, R7).

A finished run's keys expire ``max_run_age_s`` after it ended, and the sweep then drops its
entries in the registry. A run whose keys had expired before a sweep found it took its
thread with it: its entry in ``thread-runs:<thread>`` was never removed, and the key stayed,
one per thread, forever. Here every instance is stopped while the runs' keys expire (a
deploy, say), and a new one sweeps up after them.
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import httpx
import redis

from tests.redis.test_instances import instances, push

AGE = {"LOOPGATE_MAX_RUN_AGE_S": "1"}
RUNS = 5
DEADLINE_S = 30.0


def keys(server: redis.Redis, pattern: str) -> list[str]:
    return sorted(k.decode() for k in server.scan_iter(match=pattern, count=1000))


def test_runs_pruned_after_their_keys_expired_leave_no_thread_index_behind(
    redis_url: str, redis_server: str
) -> None:
    prefix = parse_qs(urlsplit(redis_url).query)["prefix"][0]
    server = redis.Redis.from_url(redis_server)
    threads = [f"thread-{i}" for i in range(RUNS)]
    with instances(redis_url, 1, env=AGE) as procs:
        ((a, _),) = procs
        runs = []
        for thread in threads:
            started = httpx.post(f"{a}/v1/runs", json={"source": "ingest", "thread_id": thread})
            runs.append(started.json()["id"])
            push(a, runs[-1], {"kind": "completion", "data": {"status": "completed"}})
        assert keys(server, f"{prefix}:thread-runs:*") == [
            f"{prefix}:thread-runs:{t}" for t in threads
        ]
    # No instance is left; the finished runs' own keys expire meanwhile.
    deadline = time.monotonic() + DEADLINE_S
    while any(keys(server, f"{prefix}:{{{run_id}}}:*") for run_id in runs):
        assert time.monotonic() < deadline, "the runs' keys never expired"
        time.sleep(0.1)
    with instances(redis_url, 1, env=AGE):
        # A new instance's sweep finds them gone, and drops what is left of them.
        deadline = time.monotonic() + DEADLINE_S
        while server.zcard(f"{prefix}:runs"):
            assert time.monotonic() < deadline, "the sweep never dropped the runs"
            time.sleep(0.1)
        assert keys(server, f"{prefix}:thread-runs:*") == []
        left = keys(server, f"{prefix}:*")
        assert not [k for k in left if any(r in k for r in runs) or "thread" in k], left
