"""A run's webhook when its instance is killed mid-run (SIGKILL): a survivor ends the run
``owner_lost`` and sends the webhook, once, though two survivors race to end it (real
``loopgate serve`` processes on a real redis-server, a real receiver)."""

from __future__ import annotations

import httpx

from tests.gateway.sse_client import envelopes, read_stream
from tests.gateway.webhook_receiver import receiving
from tests.redis.test_instances import deltas, first_events, instances, push


def test_a_survivor_sends_the_webhook_of_a_run_whose_owner_was_killed(redis_url: str) -> None:
    survivor_sends_the_webhook(redis_url + "&lease=1")


def survivor_sends_the_webhook(journal: str, *flags: str) -> None:
    """Three instances on ``journal`` (with ``flags``); the one running the run is killed."""
    with receiving() as (hooks, receiver):
        env = {"LOOPGATE_ALLOWED_OUTBOUND": f"{hooks}/hook/"}
        with instances(journal, 3, *flags, env=env) as procs:
            (a, proc_a), (b, _), (c, _) = procs
            url = f"{hooks}/hook/lost"
            started = httpx.post(f"{a}/v1/runs", json={"source": "ingest", "webhook": url})
            assert started.status_code == 201, started.text
            run_id = started.json()["id"]
            push(a, run_id, *deltas(0, 5))
            first_events(b, run_id, 5)  # committed, as a survivor sees it
            proc_a.kill()
            proc_a.wait()
            posted = receiver.delivered("lost")
            assert posted["id"] == run_id
            assert (posted["state"], posted["status"]) == ("finished", "failed")
            assert posted["reason"] == "owner_lost"
            assert posted["last_seq"] == 6
            for survivor in (b, c):
                seen = envelopes(read_stream(survivor, run_id))
                assert [e["kind"] for e in seen].count("completion") == 1
                assert seen[-1]["data"] == {"status": "failed", "reason": "owner_lost"}
            assert len(receiver.of("lost")) == 1
