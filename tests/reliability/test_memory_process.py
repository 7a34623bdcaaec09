"""Memory of a real ``loopgate serve`` under clients that never read (kernel-measured peak RSS)."""

from __future__ import annotations

import httpx

from benchmarks.memory_loads import BIG_EVENT, push_run, serve, stuck_readers

CLIENTS = 5


def test_non_reading_sse_clients_hold_one_bounded_write_each_and_leave_nothing() -> None:
    # A 38 MiB run of 1.9 MiB events; before byte-bounded batches each of these clients got
    # the whole run as one write (render, h11's copy, the transport buffer): +288 MiB here.
    with serve(env={"LOOPGATE_WRITE_TIMEOUT_S": "1"}) as server:
        with httpx.Client(base_url=server.base, timeout=60) as client:
            run_id = push_run(client, 20, BIG_EVENT).run_id
        first = stuck_readers(server, run_id, clients=CLIENTS, timeout_s=60)
        second = stuck_readers(server, run_id, clients=CLIENTS, timeout_s=60)
    for phase in (first, second):
        assert phase.detail.startswith(f"{CLIENTS} attached"), phase
    assert first.peak_mib - first.rss_before_mib < 60, first
    # What the first round held was given back: the second round reuses it.
    assert second.peak_mib - first.peak_mib < 20, (first, second)
