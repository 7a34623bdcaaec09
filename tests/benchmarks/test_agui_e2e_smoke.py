"""A smoke run of benchmarks/agui_e2e.py at tiny sizes: both servers start, both stream the same
turn to the end, every round yields figures and the report has its tables. No timing is
asserted."""

from __future__ import annotations

import math

import pytest

from benchmarks import agui_e2e


def test_the_anchor_plays_the_scripted_turn() -> None:
    rounds = agui_e2e.scripted_rounds()
    assert len(rounds) == 2  # tools, then the answer
    kinds = {key for chunk in rounds[0] for key in chunk}
    assert {"reasoning", "text", "tool", "pause"} <= kinds
    assert any("text" in chunk for chunk in rounds[1])


def test_both_sides_run_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    config = agui_e2e.Config(
        rounds=1, seconds=0.3, clients=(2,), pacings=(0.0,), min_runs=2, warm_up=False
    )
    cells, verdicts = agui_e2e.run(config)

    out = capsys.readouterr().out
    (cell,) = cells
    for side in agui_e2e.SIDES:
        assert cell.failures[side] == []
        (result,) = cell.rounds[side]
        assert result["errors"] == 0, result["first_error"]
        assert result["runs_per_s"] > 0 and result["cpu_ms_per_run"] > 0
        assert result["finished"] >= 2
        # RUN_STARTED … RUN_FINISHED with every delta of the turn in between.
        assert result["frames"] > 56
        for metric in ("ttfb_p50", "ttfb_p99", "ttlb_p50", "ttlb_p99"):
            assert math.isfinite(result[metric]) and result[metric] > 0
        assert result["ttfb_p50"] <= result["ttlb_p50"]
    assert {v.name for v in verdicts} == {"runs/s (0 ms, 2 clients)", "CPU/run (0 ms, 2 clients)"}
    assert all(v.value is not None for v in verdicts)
    for heading in ("content deltas", "AG-UI end to end", "loopgate / pydantic-ai", "targets"):
        assert heading in out
    # Both servers streamed the same deltas: the anchor plays loopgate's model.
    deltas = [line.split("content deltas ")[1] for line in out.splitlines() if "one run:" in line]
    assert len(deltas) == 2 and deltas[0] == deltas[1]
