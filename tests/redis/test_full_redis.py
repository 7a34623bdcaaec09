"""A Redis that is full, or that would evict (issue 33, R6).

With ``maxmemory`` and ``noeviction``, a full Redis refuses writes: commits were retried every
second for good, each push waited with them, and ``/healthz`` said 200. Now the first refused
commit makes the instance *unready* (``/readyz`` 503, saying why) and refuse new runs and
pushes at once (503, ``Retry-After``), while what it had accepted waits for room and is
committed once there is; ``/healthz`` (liveness) stays 200. A Redis that evicts keys when full
(``allkeys-lru``, ``volatile-*``…) would drop leases and runs without a word: ``serve``
refuses it at start.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import IO, Any

import httpx
import redis

from tests.fakes.redis_server import RedisProcess
from tests.gateway.harness import REPO, free_port
from tests.gateway.sse_client import envelopes, read_stream
from tests.redis.test_instances import deltas, instances, push

DEADLINE_S = 30.0
# Time enough for any answer that does not wait, on two busy cores.
AT_ONCE_S = 2.0
PUSH = json.dumps({"kind": "content_delta", "data": {"delta": "refused"}})


class Pusher(threading.Thread):
    """One push of one event, in the background: its status, once answered."""

    def __init__(self, base: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.base, self.run_id = base, run_id
        self.status: int | None = None
        self.start()

    def run(self) -> None:
        body = json.dumps({"kind": "content_delta", "data": {"delta": "waited"}}) + "\n"
        url = f"{self.base}/v1/runs/{self.run_id}/events"
        self.status = httpx.post(url, content=body, timeout=60).status_code


def fill(server: redis.Redis) -> None:
    """Redis is full: its maxmemory is set below what it holds (well below: what it counts
    moves by the size of its clients' buffers), so it refuses every write that may grow it."""
    used = int(server.info("memory")["used_memory"])
    server.config_set("maxmemory", used // 2)
    try:
        server.set("filler", b"x")
    except redis.exceptions.OutOfMemoryError:
        return
    raise AssertionError("Redis took a write past its maxmemory")


def at_once(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A request, answered within ``AT_ONCE_S``."""
    began = time.monotonic()
    answer = httpx.request(method, url, timeout=DEADLINE_S, **kwargs)
    assert time.monotonic() - began < AT_ONCE_S, f"{url} took {time.monotonic() - began:.1f} s"
    return answer


def readiness(base: str, status: int) -> dict[str, Any]:
    """``/readyz`` once it answers ``status``."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = httpx.get(f"{base}/readyz")
        if answer.status_code == status:
            body: dict[str, Any] = answer.json()
            return body
        assert time.monotonic() < deadline, f"/readyz never answered {status}: {answer.text}"
        time.sleep(0.05)


def test_a_full_redis_makes_the_instance_unready_and_refuse_new_work_at_once() -> None:
    logs: list[IO[bytes]] = []
    with (
        RedisProcess(
            "--save", "", "--appendonly", "no", "--maxmemory", "64mb",
            "--maxmemory-policy", "noeviction",
        ) as server,
        # A lease longer than Redis stays full here: one that lapsed meanwhile could not be
        # renewed (a full Redis refuses that too), and its runs would end as their owner's.
        instances(f"{server.url}?lease=30", 2, log_files=logs) as procs,
    ):  # fmt: skip
        (base, _), (other, _) = procs
        client = redis.Redis(port=server.port)
        run_id = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).json()["id"]
        push(base, run_id, *deltas(0, 3))
        assert readiness(base, 200) == {"status": "ready", "reasons": []}
        fill(client)
        # Accepted before the instance could know: it waits for room, as committed events do.
        waiting = Pusher(base, run_id)
        unready = readiness(base, 503)
        assert unready["status"] == "unready"
        assert [r for r in unready["reasons"] if "Redis is full" in r], unready
        # New work is refused at once, never left waiting.
        refused = at_once("POST", f"{base}/v1/runs/{run_id}/events", content=PUSH)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "full" in refused.json()["detail"]
        started = at_once("POST", f"{base}/v1/runs", json={"source": "ingest"})
        assert started.status_code == 503 and "full" in started.json()["detail"]
        # Another instance finds out by itself (its lease's renewal is refused too), and
        # refuses a push to the run in the same words.
        assert [r for r in readiness(other, 503)["reasons"] if "Redis is full" in r]
        forwarded = at_once("POST", f"{other}/v1/runs/{run_id}/events", content=PUSH)
        assert forwarded.status_code == 503 and forwarded.headers["retry-after"] == "5"
        assert forwarded.json()["detail"] == refused.json()["detail"]
        assert httpx.get(f"{base}/healthz").status_code == 200  # alive all along
        assert waiting.status is None
        # Room again: what waited is committed, and the instance is ready.
        client.config_set("maxmemory", "64mb")
        waiting.join(DEADLINE_S)
        assert waiting.status == 200
        assert readiness(base, 200)["status"] == "ready"
        push(base, run_id, *deltas(3, 4), {"kind": "completion", "data": {"status": "completed"}})
        seen = envelopes(read_stream(base, run_id))
        assert [e["seq"] for e in seen] == list(range(1, 7))
        assert [e["data"].get("delta") for e in seen[:5]] == ["t0", "t1", "t2", "waited", "t3"]
        logs[0].seek(0)
        logged = logs[0].read().decode()
        # Said once, not at every retry; and its end.
        assert logged.count("Redis is full") == 1, logged[-3000:]
        assert "commits land again" in logged


def test_a_redis_that_evicts_keys_is_refused_at_start() -> None:
    with RedisProcess(
        "--save", "", "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"
    ) as server:
        port = str(free_port())
        done = subprocess.run(
            [sys.executable, "-m", "loopgate", "serve", "--port", port, "--journal", server.url],
            cwd=REPO,
            capture_output=True,
            timeout=60,
        )
    assert done.returncode == 2
    said = done.stderr.decode()
    assert said.startswith("loopgate serve: --journal: Redis at 127.0.0.1:"), said
    assert "evicts keys when it is full (maxmemory-policy allkeys-lru)" in said
    assert "noeviction" in said and len(said.splitlines()) == 1
