"""A smoke run of benchmarks/scale_out.py at tiny sizes: its Redis, its PostgreSQL and its
servers start, every cell yields a figure and the report has its tables. No timing is
asserted."""

from __future__ import annotations

import pytest

from benchmarks import queue_wait, scale_out
from tests.fakes.redis_server import redis_server


def test_every_cell_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = scale_out.Sizes(
        rounds=1, events=200, live_events=50, clients=4, run_counts=(1, 4), memory_runs=(3, 3)
    )
    report = scale_out.Report()
    scale_out.run(sizes, report)
    assert report.failures == []
    for config in scale_out.CONFIGS:
        for runs in sizes.run_counts:
            (got,) = report.ingest[(config, runs)]
            assert got.rate > 0 and got.client_us > 0
            # CPU is read in clock ticks: a tiny round may see none of the servers'.
            assert got.gateway_us >= 0 and got.redis_us >= 0
        ((p50, p99),) = report.latency[config]
        assert 0 < p50 <= p99
    assert len(report.memory) == 2 and all(kib > 0 for kib in report.memory)
    scale_out.print_report(report, sizes)
    out = capsys.readouterr().out
    assert "(a) ingest" in out and "(b) acceptance → receipt" in out and "(c) redis ×2" in out


def test_the_queue_wait_is_measured_with_each_number_of_workers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sizes = queue_wait.QueueSizes(rounds=1, runs=6)
    report = queue_wait.QueueReport()
    with redis_server() as redis_url:
        queue_wait.measure(redis_url, sizes, report)
    assert report.failures == []
    for workers in queue_wait.WORKERS:
        # A run that found room has its first event before its client read the answer
        # (waits are taken from that read): a wait may be a little under 0.
        ((p50, p99),) = report.waits[workers]
        assert p50 <= p99
    queue_wait.print_queue(report, sizes)
    assert "(d) queue wait" in capsys.readouterr().out
