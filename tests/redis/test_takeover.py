"""Takeover after a crash and graceful deploys, on `loopgate serve` processes sharing one Redis
(docs/scale.md, "Takeover after a crash" and "Graceful deploys").

The runs are the reference loop's on the scripted model, paced (``scripted_delay_s``) so that
an instance can be killed or stopped while its run is in the middle of its second round.
"""

from __future__ import annotations

from typing import IO, Any

from tests.redis.takeover_support import (
    PACED,
    killed_owner_resumed,
    start,
    stop_in_second_round,
    stopped_owner_hands_over,
    terminal,
    whole_stream,
)
from tests.redis.test_instances import first_events, instances
from tests.waiting import wait_until


def test_a_killed_owners_reference_run_is_finished_by_a_survivor(redis_url: str) -> None:
    killed_owner_resumed(redis_url + "&lease=1")


def test_a_run_of_an_instance_stopped_with_sigterm_completes_on_another(redis_url: str) -> None:
    # A lease far longer than the test: only the hand-over can move the run in time.
    stopped_owner_hands_over(redis_url + "&lease=60")


def test_attempts_are_bounded(redis_url: str) -> None:
    env = {**PACED, "LOOPGATE_MAX_RUN_ATTEMPTS": "2"}
    logs: list[IO[bytes]] = []
    with instances(redis_url + "&lease=1", 3, env=env, log_files=logs) as procs:
        (a, proc_a), *survivors = procs
        run_id = start(a)
        stop_in_second_round(survivors[1][0], run_id, proc_a)

        def taker() -> int | None:
            for i, log in enumerate(logs[1:]):
                log.seek(0)
                if b"resuming it here (attempt 2)" in log.read():
                    return i + 1
            return None

        # Attempt 2 is the last: its instance killed too, the run ends owner_lost.
        new_owner = wait_until(taker, 30, "a survivor resumed the run")
        reader, proc = procs[3 - new_owner][0], procs[new_owner][1]
        stop_in_second_round(reader, run_id, proc, after_resumed=True)
        whole = whole_stream(reader, run_id)
        assert [e["seq"] for e in whole] == list(range(1, len(whole) + 1))
        assert [e["data"]["attempt"] for e in whole if e["kind"] == "run_resumed"] == [2]
        assert [e for e in whole if terminal(e)] == [whole[-1]]
        assert whole[-1]["data"] == {"status": "failed", "reason": "owner_lost"}


def killed_plugged_run(redis_url: str, loop: list[str], prompt: str) -> list[dict[str, Any]]:
    """A run of the plugged ``loop`` whose instance is killed once a client has seen three of
    its events: the whole run, as that client reads the rest from the other instance."""
    with instances(redis_url + "&lease=1", 2, *loop) as procs:
        (a, proc_a), (b, _) = procs
        run_id = start(a, prompt)
        before = first_events(b, run_id, 3)
        proc_a.kill()
        proc_a.wait()
        whole = before + whole_stream(b, run_id, after=3)
    assert [e["seq"] for e in whole] == list(range(1, len(whole) + 1))
    assert [e for e in whole if terminal(e)] == [whole[-1]]
    return whole


def test_a_non_resumable_plugged_loops_run_ends_owner_lost_once(redis_url: str) -> None:
    whole = killed_plugged_run(redis_url, ["--loop", "tests.plugs.sample_loop:sample"], "slow w")
    assert "run_resumed" not in [e["kind"] for e in whole]
    assert whole[-1]["data"] == {"status": "failed", "reason": "owner_lost"}


def test_a_resumable_plugged_loop_goes_on_from_the_events_it_is_given(redis_url: str) -> None:
    loop = ["--loop", "tests.redis.resumable_loop:words", "--loop-resumable"]
    whole = killed_plugged_run(redis_url, loop, "count")
    # Every word once: the new attempt was handed the words said before it.
    said = [e["data"]["delta"] for e in whole if e["kind"] == "content_delta"]
    assert said == [f"w{i} " for i in range(20)]
    assert [e["data"]["attempt"] for e in whole if e["kind"] == "run_resumed"] == [2]
    assert whole[-1]["data"] == {"status": "completed", "attempt": 2}
