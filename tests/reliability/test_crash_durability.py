"""Nothing acknowledged is lost and no seq is reused: ``kill -9`` at seeded moments.

``loopgate serve --journal sqlite:…`` is a child process fed by two NDJSON pushers and one
WebSocket pusher (``?ack=1``), each run watched live over SSE; the gateway is killed once a
trial's number of events has been acknowledged, started again on the same file, and every run
is read back with httpx-sse (benchmarks/crash_trials.py has the checks). More trials:
``python -m benchmarks.soak durability``.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.crash_trials import TrialResult, gateway, run_trial
from tests.gateway.harness import free_port

# Seeds whose kills come early, middle and late (after 58, 138, 395 and 638 acknowledged
# events of at most 800): each trial is a kill and a restart, ~7 s on two busy cores.
TRIALS = (2, 1, 0, 5)


def failures(results: list[TrialResult]) -> list[str]:
    return [f"trial {r.trial}: {p}" for r in results for p in r.problems]


def test_kill_9_loses_no_acknowledged_event_and_reuses_no_seq(tmp_path: Path) -> None:
    with gateway(tmp_path / "journal.sqlite3", free_port()) as gw:
        results = [run_trial(gw, trial) for trial in TRIALS]
    assert failures(results) == []
    assert [(r.lost, r.duplicated, r.reused, r.resume_errors) for r in results] == [
        (0, 0, 0, 0)
    ] * len(TRIALS)
    # Each kill came after its trial's threshold of acknowledged events (all were checked).
    assert all(r.acked >= r.kill_after for r in results)


def test_synchronous_full_keeps_the_same_promise(tmp_path: Path) -> None:
    env = {"LOOPGATE_JOURNAL_SYNCHRONOUS": "full"}
    with gateway(tmp_path / "journal.sqlite3", free_port(), env=env) as gw:
        results = [run_trial(gw, trial) for trial in (100, 101)]
    assert failures(results) == []
    assert all(r.acked >= r.kill_after for r in results)
