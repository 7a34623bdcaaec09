"""A smoke run of benchmarks/loop_plugs.py at tiny sizes: it runs end to end and every plug
delivers every event. No timing is asserted."""

from __future__ import annotations

import pytest

from benchmarks import loop_plugs


def test_every_plug_delivers_every_event(capsys: pytest.CaptureFixture[str]) -> None:
    config = loop_plugs.Config(events=600, repeat=1, rate=2_000, paced_events=40)
    plugs = loop_plugs.run(config)

    assert list(plugs) == list(loop_plugs.PLUGS)
    for plug in plugs.values():
        for scenario in loop_plugs.SCENARIOS:
            (result,) = plug.results[scenario]
            expected = config.paced_events if scenario == "paced" else config.events
            assert (plug.name, scenario, result.deltas, result.status) == (
                plug.name,
                scenario,
                expected,
                "completed",
            )
            if scenario == "paced":
                assert len(result.latencies_ns) == expected
    assert plugs["http"].pid is not None and plugs["stdio"].pid is not None

    verdicts = loop_plugs.report(plugs, config)
    out = capsys.readouterr().out
    assert set(verdicts) == set(loop_plugs.OUT_OF_PROCESS)
    for heading in ("(1) throughput", "(2) throughput", "(3) latency"):
        assert heading in out
