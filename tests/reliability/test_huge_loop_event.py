"""A Python ``--loop`` yielding one event far past a run's limits, in a real ``loopgate serve``
(on its event loop, and in a worker thread): the run ends ``byte_limit`` (``max_run_bytes``, the
loop's guard) or ``memory_limit`` (``max_run_retained_bytes``, the hub's), and the gateway holds
nothing of the event afterwards (RSS from ``/proc``); a second such run does not add to it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from benchmarks.memory_loads import Server, serve
from tests.gateway.sse_client import envelopes, read_stream

EVENT_MIB = 200
LIMIT = 16 << 20
LIMITS = {
    # setting: (reason, what the message says, the gateway's copy of the event at its peak)
    "MAX_RUN_BYTES": ("byte_limit", f"the loop sent more than {LIMIT} bytes of events", 0),
    # The hub counts an event once it is encoded: refused then, its copy gone at once.
    "MAX_RUN_RETAINED_BYTES": ("memory_limit", f"the limit of {LIMIT} bytes", EVENT_MIB),
}


def huge_run(base: str) -> dict[str, object]:
    with httpx.Client(base_url=base, timeout=60) as client:
        created = client.post("/v1/runs", json={"input": f"huge {EVENT_MIB}"})
    assert created.status_code == 201, created.text
    *_, completion = envelopes(read_stream(base, created.json()["id"], timeout=60))
    data: dict[str, object] = completion["data"]
    return data


def threads(server: Server) -> int:
    return len(list(Path(f"/proc/{server.pid}/task").iterdir()))


def settled_rss(server: Server, threads_before: int) -> float:
    """RSS once a worker thread the run had is gone too (it closes the loop's generator,
    which holds the loop's own copy of the event): at once on the event loop."""
    deadline = time.monotonic() + 10
    while threads(server) > threads_before and time.monotonic() < deadline:
        time.sleep(0.01)  # a thread's exit: /proc is all there is to wait on
    return server.rss()


@pytest.mark.parametrize("runner", ["event_loop", "thread"])
@pytest.mark.parametrize("setting", LIMITS)
def test_an_event_past_a_limit_is_refused_and_not_held(runner: str, setting: str) -> None:
    reason, message, copy_mib = LIMITS[setting]
    env = {f"LOOPGATE_{setting}": str(LIMIT), "LOOPGATE_LOOP_RUNNER": runner}
    with serve("--loop", "tests.plugs.hostile_loops:hostile", env=env) as server:
        before, threads_before = server.rss(), threads(server)
        server.reset_peak()
        first = huge_run(server.base)
        after_first = settled_rss(server, threads_before)
        peak = server.peak()
        second = huge_run(server.base)
        after_second = settled_rss(server, threads_before)
    for completion in (first, second):
        assert completion["status"] == "failed"
        assert completion["reason"] == reason
        assert message in str(completion["message"])
    # The loop itself built the 200 MiB string; past max_run_bytes by its strings alone, the
    # gateway refused it without a copy (it peaked at twice the event while it encoded it).
    assert EVENT_MIB - 10 < peak - before < EVENT_MIB + copy_mib + 40, (before, peak)
    # Before: the failed run's fault kept the event and its encoded copy (+400 MiB each run).
    assert after_first - before < 40, (before, after_first)
    assert after_second - before < 40, (before, after_first, after_second)
