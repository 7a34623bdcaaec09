"""Smoke runs of the in-process benchmarks at tiny sizes (loop_overhead, agui_encode,
retention): each measures every case in every round and reports sane figures. No timing is
asserted."""

from __future__ import annotations

import math

import pytest

from benchmarks import agui_encode, loop_overhead, retention


def test_loop_overhead_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    result = loop_overhead.report(turns=3, repeat=2)
    out = capsys.readouterr().out

    assert set(result["counts"]) == set(loop_overhead.PROMPTS)
    assert all(count > 10 for count in result["counts"].values())
    for series in (result["loop_us"], result["only_us"], result["ns"]):
        assert all(len(values) == 2 for values in series.values())
    assert all(v > 0 for values in result["loop_us"].values() for v in values)
    assert math.isfinite(result["worst"])
    assert "(1) reference loop" in out and "(2) encoding" in out and "median" in out


def test_agui_encode_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    paths = {"a": lambda: 10, "b": lambda: 20}
    results = agui_encode.measure(paths, seconds=0.01, rounds=3)
    assert {k: len(v) for k, v in results.items()} == {"a": 3, "b": 3}
    assert all(v > 0 for values in results.values() for v in values)

    agui_encode.main(["--seconds", "0.05", "--rounds", "2"])
    out = capsys.readouterr().out
    for path in ("loopgate live", "loopgate drain", "official", "limit"):
        assert path in out


def test_retention_counts_what_is_held(capsys: pytest.CaptureFixture[str]) -> None:
    results = retention.run(runs=20, sources=list(retention.SOURCES), gc_rounds=2)
    out = capsys.readouterr().out

    assert [r.source for r in results] == list(retention.SOURCES)
    for r in results:
        assert r.fill.runs == 20 and r.fill.events > 20
        assert r.encoded_per_event > 50
        # Holding the runs costs memory, and it is the same order as what they encode to.
        assert r.retained_per_event > 0 and 0.1 < r.ratio < 100
        assert len(r.gc_full_ms) == 2 and all(ms > 0 for ms in r.gc_full_ms)
    assert "retained memory" in out and "full gc.collect()" in out and "targets" in out
