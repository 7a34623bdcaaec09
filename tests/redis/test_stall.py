"""A Redis that stalls, or restarts, for about a lease does not end healthy runs (issue 33, R5).

Leases expire on Redis's clock: SIGSTOP of Redis for a lease let every lease lapse at once,
and the first reaper to read after it ended a live instance's runs `owner_lost` before that
instance's renewal, queued behind the stall, landed (2 of 2 runs; a 15 s kill of a 10 s lease:
4 of 6 trials). A reaper now judges only after a whole lease of Redis answering on time.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.redis_server import RedisProcess
from tests.gateway.sse_client import envelopes, read_stream
from tests.redis.test_instances import deltas, instances, push

LEASE_S = 2.0
# How long Redis is away: past the lease, so that every lease in it has lapsed on its clock.
AWAY_S = LEASE_S * 2
DONE = {"kind": "completion", "data": {"status": "completed"}}


def stalled(server: RedisProcess) -> None:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        # The fault itself lasts this long (nothing to wait for: Redis answers nobody).
        threading.Event().wait(AWAY_S)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def restarted(server: RedisProcess) -> None:
    server.kill()
    threading.Event().wait(AWAY_S)  # the outage itself, as above
    server.start()


@pytest.mark.parametrize("fault", [stalled, restarted], ids=["sigstop", "kill"])
def test_redis_away_for_a_lease_ends_no_live_run(
    tmp_path: Path, fault: Callable[[RedisProcess], None]
) -> None:
    with (
        RedisProcess(
            "--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always", "--save", ""
        ) as server,
        instances(f"{server.url}?lease={LEASE_S}", 2) as procs,
    ):
        (a, _), (b, _) = procs
        runs = [httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"] for _ in "ab"]
        for run_id in runs:
            push(a, run_id, *deltas(0, 3))
        owners_client: list[Any] = []
        reader = threading.Thread(
            target=lambda: owners_client.extend(envelopes(read_stream(a, runs[0], timeout=60)))
        )
        reader.start()
        fault(server)
        # Both instances live through it: the runs go on on their owner, and end as it says.
        for run_id in runs:
            push(a, run_id, *deltas(3, 6), DONE)
        for run_id in runs:
            whole = envelopes(read_stream(b, run_id))
            assert [e["seq"] for e in whole] == list(range(1, 8))
            assert whole[-1]["data"] == {"status": "completed"}
        reader.join(30)
        assert not reader.is_alive()
        assert owners_client == envelopes(read_stream(b, runs[0]))
