"""benchmarks/ws_idle.py end to end at a tiny size: it must run and report sane figures."""

from __future__ import annotations

import pytest

from benchmarks import ws_idle


def test_every_endpoint_and_compression_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    assert ws_idle.main(["--connections", "20", "--endpoint", "/rpc/ws", "--trace"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("/rpc/ws")]
    assert [row[1] for row in rows] == ["off", "on"], out
    for row in rows:
        assert row[2] == "20", row
        # KiB each: a figure (20 may fit in what the warm-up left free, so not its size).
        float(row[5])
    assert "B/conn" in out  # what tracemalloc saw holding it
