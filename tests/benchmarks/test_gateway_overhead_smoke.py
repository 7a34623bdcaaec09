"""A smoke run of benchmarks/gateway_overhead.py at a tiny size: both servers start, every
route streams whole runs on both sides, and the report has its tables. No timing is
asserted."""

from __future__ import annotations

import pytest

from benchmarks import gateway_overhead


def test_every_route_is_measured_on_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    config = gateway_overhead.Config(rounds=1, seconds=0.5, clients=(2,), deltas=5)
    cells, _ = gateway_overhead.run(config)
    assert [c.route for c in cells] == list(gateway_overhead.ROUTES)
    for cell in cells:
        for side in gateway_overhead.SIDES:
            assert cell.failures[side] == [], (cell.route, side)
            (result,) = cell.rounds[side]
            assert result["runs_per_s"] > 0 and result["finished"] > 0
            # A whole run's frames: each delta, and the protocol's own around them.
            assert result["frames"] > config.deltas
    out = capsys.readouterr().out
    for name in gateway_overhead.ROUTES:
        assert f"{name}: loopgate vs the minimal endpoint" in out
