"""A Python ``--loop`` yielding one event far past ``max_run_bytes``, in a real ``loopgate serve``
(on its event loop, and in a worker thread): the run ends ``byte_limit`` and the gateway holds
nothing of the event afterwards (RSS from ``/proc``); a second such run does not add to it."""

from __future__ import annotations

import httpx
import pytest

from benchmarks.memory_loads import serve
from tests.gateway.sse_client import envelopes, read_stream

EVENT_MIB = 200
LIMIT = 16 << 20


def huge_run(base: str) -> dict[str, object]:
    with httpx.Client(base_url=base, timeout=60) as client:
        created = client.post("/v1/runs", json={"input": f"huge {EVENT_MIB}"})
    assert created.status_code == 201, created.text
    *_, completion = envelopes(read_stream(base, created.json()["id"], timeout=60))
    data: dict[str, object] = completion["data"]
    return data


@pytest.mark.parametrize("runner", ["event_loop", "thread"])
def test_an_event_past_the_byte_limit_is_refused_and_not_held(runner: str) -> None:
    env = {"LOOPGATE_MAX_RUN_BYTES": str(LIMIT), "LOOPGATE_LOOP_RUNNER": runner}
    with serve("--loop", "tests.loops.hostile_loops:hostile", env=env) as server:
        before = server.rss()
        server.reset_peak()
        first = huge_run(server.base)
        after_first = server.rss()
        peak = server.peak()
        second = huge_run(server.base)
        after_second = server.rss()
    for completion in (first, second):
        assert completion["status"] == "failed"
        assert completion["reason"] == "byte_limit"
        assert completion["message"] == f"the loop sent more than {LIMIT} bytes of events"
    # The loop itself built the 200 MiB string; the gateway refused it without a copy (it
    # peaked at twice the event while it encoded it to find its size).
    assert EVENT_MIB - 10 < peak - before < EVENT_MIB + 40, (before, peak)
    # Before: the failed run's fault kept the event and its encoded copy (+400 MiB each run).
    assert after_first - before < 40, (before, after_first)
    assert after_second - before < 40, (before, after_first, after_second)
