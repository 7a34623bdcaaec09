"""A smoke run of benchmarks/fanout.py at tiny sizes: every part runs, every server (loopgate
and both anchors) delivers every event, and the report has its tables. No timing is asserted."""

from __future__ import annotations

import pytest

from benchmarks import fanout


def test_every_part_runs(capsys: pytest.CaptureFixture[str]) -> None:
    report = fanout.Report()
    fanout.run(fanout.Sizes.tiny(), report)
    verdicts = fanout.print_report(report)
    out = capsys.readouterr().out

    assert report.failed == []
    assert [row[0] for row in report.a] == [1, 10, 100, 1000]
    assert report.b is not None
    assert report.b.failures == {}
    for server in fanout.SERVERS:
        for clients in (1, 100):
            (value,) = report.b.results[(server, clients)]
            assert value > 0
    for clients in (1, 100):
        (latency,) = report.c[clients]
        assert isinstance(latency, dict), latency
        # Every event of the live run reached every client (200 deltas + the completion).
        assert latency["received"] == 201 * clients
        assert 0 <= latency["p50"] <= latency["p99"] <= latency["max"]
    assert report.d is not None and report.d[0] == 20
    assert any(k.startswith("native SSE >= 1.5x batched") for k in verdicts)
    for heading in ("(a) hub fan-out", "(b) SSE over loopback", "(c) live latency", "targets"):
        assert heading in out


def test_a_failed_measurement_is_recorded_not_raised() -> None:
    # Nothing listens on the port: the round fails, the benchmark goes on.
    value = fanout.finished_stream(fanout.free_port(), "/nowhere", 1, 10)
    assert isinstance(value, str)
