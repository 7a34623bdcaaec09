"""The local run queue (memory journal; SQLite is the same code): loop runs past
``max_active_runs`` wait as ``queued`` with their position, go in order as runs end, can be
cancelled while waiting, and 429 comes only once ``max_queued_runs`` wait. A real gateway on
127.0.0.1, driven over its HTTP API."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.gateway.test_multitask import run_of
from tests.gateway.test_multitask import start as start_body
from tests.waiting import wait_until

pytestmark = pytest.mark.gateway(scripted_delay_s=0.002, max_active_runs=1, max_queued_runs=2)


def start(http: httpx.Client, prompt: str) -> dict[str, Any]:
    return start_body(http, {"input": prompt})


def events(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """The run's whole stream, to its terminal event."""
    with http.stream("GET", f"/v1/runs/{run_id}/events") as stream:
        return [json.loads(line[5:]) for line in stream.iter_lines() if line.startswith("data:")]


def test_runs_past_the_limit_wait_in_order_and_429_when_the_queue_is_full(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        first = start(http, "slow tool")  # holds the one place to run until cancelled
        assert first["state"] == "running" and "queue_position" not in first
        second = start(http, "plain second")
        third = start(http, "plain third")
        assert (second["state"], second["queue_position"]) == ("queued", 1)
        assert (third["state"], third["queue_position"]) == ("queued", 2)
        listed = {r["id"]: r for r in http.get("/v1/runs").json()["runs"]}
        assert listed[third["id"]]["queue_position"] == 2

        full = http.post("/v1/runs", json={"input": "plain fourth"})
        assert full.status_code == 429
        assert "queue is full" in full.json()["detail"] and full.headers["retry-after"]

        # A queued run cancelled leaves the queue: it ends without having run.
        cancelled = http.post(f"/v1/runs/{second['id']}/cancel")
        assert cancelled.status_code == 202
        ended = events(http, second["id"])
        assert [e["kind"] for e in ended] == ["completion"]
        assert ended[0]["data"]["status"] == "cancelled"
        assert run_of(http, third["id"])["queue_position"] == 1

        # Steering a run that has not started is refused, not lost.
        steer = http.post(f"/v1/runs/{third['id']}/steer", json={"content": "faster"})
        assert steer.json()["accepted"] is False and "queued" in steer.json()["detail"]

        # The running run ends: the next one goes, and runs to its end.
        http.post(f"/v1/runs/{first['id']}/cancel")
        done = events(http, third["id"])
        assert done[-1]["kind"] == "completion" and done[-1]["data"]["status"] == "completed"
        assert run_of(http, third["id"])["state"] == "finished"


def test_ingest_runs_do_not_wait(gateway: str) -> None:
    """An ingest run's events come from its client as soon as it is started: it is refused
    at the limit rather than queued."""
    with httpx.Client(base_url=gateway, timeout=30) as http:
        slow = start(http, "slow tool")
        refused = http.post("/v1/runs", json={"source": "ingest"})
        assert refused.status_code == 429
        assert "too many active runs" in refused.json()["detail"]
        http.post(f"/v1/runs/{slow['id']}/cancel")
        wait_until(lambda: run_of(http, slow["id"])["state"] == "finished", 10, "slow to end")
