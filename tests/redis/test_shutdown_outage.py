"""SIGTERM while Redis is down and a run is going (issue 33, R4).

The drain ends the instance's runs and commits their terminal events; with Redis gone that
commit was retried without end, ``shutdown_grace_s`` never applied, and the process hung
(30-70 s and counting, ``/healthz`` still 200). Now the commit gets what is left of the
grace: the instance then says what it could not commit, ends its streams (their clients
resume on another instance, where the run ends once this one's lease lapses), answers a push
still waiting on its commit 503, and exits.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from typing import IO

import httpx
import redis
from httpx_sse import connect_sse

from tests.fakes.redis_server import RedisProcess
from tests.redis.test_instances import deltas, instances, push

GRACE_S = 2.0
# Beyond the grace: the server's own shutdown and Python's exit, on two busy cores.
MARGIN_S = 6.0


def held_commit(server: RedisProcess) -> None:
    """Wait until a commit (the append script) is held by ``CLIENT PAUSE``."""
    client = redis.Redis(port=server.port)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if any(c["cmd"] == "evalsha" and "b" in c["flags"] for c in client.client_list()):
            return
        time.sleep(0.01)
    raise AssertionError("the push's commit never reached Redis")


class Pusher(threading.Thread):
    """One push of one event, in the background: its answer, or the error that ended it."""

    def __init__(self, base: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.base, self.run_id = base, run_id
        self.outcome: object = None
        self.start()

    def run(self) -> None:
        try:
            self.outcome = httpx.post(
                f"{self.base}/v1/runs/{self.run_id}/events",
                content=b'{"kind": "content_delta", "data": {"delta": "late"}}\n',
                timeout=60,
            )
        except httpx.HTTPError as exc:
            self.outcome = exc


def test_sigterm_while_redis_is_down_exits_within_the_grace() -> None:
    logs: list[IO[bytes]] = []
    grace = {"LOOPGATE_SHUTDOWN_GRACE_S": str(GRACE_S)}
    with (
        RedisProcess("--save", "", "--appendonly", "no") as server,
        instances(server.url, 1, env=grace, log_files=logs) as procs,
        httpx.Client(base_url=procs[0][0], timeout=60) as client,
    ):
        ((base, proc),) = procs
        run_id = client.post("/v1/runs", json={"source": "ingest"}).json()["id"]
        push(base, run_id, *deltas(0, 3))
        with connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
            events = source.iter_sse()
            assert [next(events).id for _ in range(3)] == ["1", "2", "3"]
            # The run is going and a client follows it live; an event is pushed, and its
            # commit is under way (held: CLIENT LIST shows it) when Redis dies. Then the
            # instance is told to stop.
            redis.Redis(port=server.port).execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
            pushing = Pusher(base, run_id)
            held_commit(server)
            server.kill()
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(GRACE_S + MARGIN_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"running {GRACE_S + MARGIN_S:g} s after SIGTERM") from None
            took = time.monotonic() - sent
            # The stream ended whole, without the end the instance could not commit: its
            # client resumes elsewhere from the last id it got.
            assert list(events) == []
        # The push was never acknowledged, and is told to retry (never a 500).
        pushing.join(20)
        answer = pushing.outcome
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
        logs[0].seek(0)
        logged = logs[0].read().decode()
        assert "could not commit the end of 1 run" in logged, logged[-3000:]
        print(f"exited {took:.2f} s after SIGTERM (grace {GRACE_S:g} s)")
