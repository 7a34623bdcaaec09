"""A run's webhook when its gateway dies before the run ends: the next process ends the run
``server_restarted`` at its start, and sends the webhook once (a real receiver, a real
``loopgate serve`` killed with SIGKILL, the SQLite journal)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.gateway.harness import gateway_process
from tests.gateway.test_process import journal_args, on_disk
from tests.gateway.webhook_receiver import receiving
from tests.waiting import wait_until


def test_a_run_ended_by_the_next_process_sends_its_webhook_once(tmp_path: Path) -> None:
    with receiving() as (hooks, receiver):
        env = {"LOOPGATE_ALLOWED_OUTBOUND": f"{hooks}/hook/"}
        url = f"{hooks}/hook/restarted"
        with gateway_process(*journal_args(tmp_path), env=env) as (base, proc):
            started = httpx.post(f"{base}/v1/runs", json={"source": "ingest", "webhook": url})
            assert started.status_code == 201, started.text
            run_id = started.json()["id"]
            body = json.dumps({"kind": "content_delta", "data": {"delta": "hi"}}) + "\n"
            assert httpx.post(f"{base}/v1/runs/{run_id}/events", content=body).status_code == 200
            wait_until(lambda: on_disk(tmp_path, run_id) == 1, 10, "the delta in the journal")
            proc.kill()
            proc.wait()
        assert receiver.of("restarted") == []  # the killed process sent nothing
        with gateway_process(*journal_args(tmp_path), env=env) as (base, _):
            posted = receiver.delivered("restarted")
            assert posted["id"] == run_id
            assert (posted["state"], posted["status"]) == ("finished", "failed")
            assert posted["reason"] == "server_restarted"
            assert posted["last_seq"] == 2
            # What the receiver was told is what the run says from then on.
            shown = httpx.get(f"{base}/v1/runs/{run_id}").json()
            assert (shown["status"], shown["last_seq"]) == ("failed", 2)
        assert len(receiver.of("restarted")) == 1
