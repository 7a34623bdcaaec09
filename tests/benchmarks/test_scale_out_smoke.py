"""A smoke run of benchmarks/scale_out.py at tiny sizes: its Redis and its four servers start,
every cell yields a figure and the report has its tables. No timing is asserted."""

from __future__ import annotations

import pytest

from benchmarks import scale_out


def test_every_cell_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = scale_out.Sizes(rounds=1, events=200, live_events=50, clients=4, run_counts=(1, 4))
    report = scale_out.Report()
    scale_out.run(sizes, report)
    assert report.failures == []
    for config in scale_out.CONFIGS:
        for runs in sizes.run_counts:
            (rate,) = report.ingest[(config, runs)]
            assert rate > 0
        ((p50, p99),) = report.latency[config]
        assert 0 < p50 <= p99
    scale_out.print_report(report, sizes)
    out = capsys.readouterr().out
    assert "(a) ingest" in out and "(b) acceptance → receipt" in out
