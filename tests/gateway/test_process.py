"""`loopgate serve` as a real process: restarts with SQLite, graceful shutdown, crash recovery."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx

from tests.gateway.harness import gateway_process
from tests.gateway.sse_client import envelopes, read_stream
from tests.waiting import wait_until


def journal_args(tmp_path: Path, delay: str = "0") -> tuple[str, ...]:
    return ("--journal", f"sqlite:{tmp_path / 'journal.sqlite3'}", "--scripted-delay", delay)


def subscribers(base: str, run_id: str) -> int:
    count: int = httpx.get(f"{base}/v1/runs/{run_id}").json()["subscribers"]
    return count


def on_disk(tmp_path: Path, run_id: str) -> int:
    """How many of the run's events the journal has committed to its file."""
    path = tmp_path / "journal.sqlite3"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        query = "SELECT count(*) FROM events WHERE run_id = ?"
        count: int = db.execute(query, (run_id,)).fetchone()[0]
    return count


def test_sqlite_restart_loses_no_event_of_a_finished_run(tmp_path: Path) -> None:
    with gateway_process(*journal_args(tmp_path)) as (base, _):
        run_id = httpx.post(f"{base}/v1/runs", json={"input": "what is 2+2?"}).json()["id"]
        before = envelopes(read_stream(base, run_id))
        assert before[-1]["kind"] == "completion"
    with gateway_process(*journal_args(tmp_path)) as (base, _):
        assert envelopes(read_stream(base, run_id)) == before
        assert httpx.get(f"{base}/v1/runs/{run_id}").json()["state"] == "finished"
        resumed = read_stream(base, run_id, headers={"last-event-id": "3"})
        assert [int(e.id) for e in resumed] == list(range(4, len(before) + 1))


def test_graceful_shutdown_ends_open_streams_with_a_terminal_event(tmp_path: Path) -> None:
    loop_events: list[dict[str, Any]] = []
    ingest_events: list[dict[str, Any]] = []
    with gateway_process(*journal_args(tmp_path, "0.05")) as (base, _):
        loop_run = httpx.post(f"{base}/v1/runs", json={"input": "tell me a story"}).json()["id"]
        ingest_run = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).json()["id"]
        readers = [
            threading.Thread(
                target=lambda: loop_events.extend(envelopes(read_stream(base, loop_run)))
            ),
            threading.Thread(
                target=lambda: ingest_events.extend(envelopes(read_stream(base, ingest_run)))
            ),
        ]
        for reader in readers:
            reader.start()
        wait_until(lambda: subscribers(base, loop_run) == 1, 10, "the loop run's reader")
        wait_until(lambda: subscribers(base, ingest_run) == 1, 10, "the ingest run's reader")
        started = time.monotonic()
    # Leaving the block sent SIGINT: both streams must have got their end promptly.
    for reader in readers:
        reader.join(10)
        assert not reader.is_alive()
    assert time.monotonic() - started < 8
    assert loop_events[-1]["kind"] == "completion"
    assert loop_events[-1]["data"]["status"] == "cancelled"
    assert ingest_events[-1]["data"] == {"status": "failed", "reason": "server_shutdown"}
    with gateway_process(*journal_args(tmp_path)) as (base, _):
        assert envelopes(read_stream(base, loop_run)) == loop_events


def test_a_crash_leaves_no_run_without_an_end(tmp_path: Path) -> None:
    with gateway_process(*journal_args(tmp_path)) as (base, proc):
        run_id = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).json()["id"]
        body = json.dumps({"kind": "content_delta", "data": {"delta": "hi"}}) + "\n"
        assert httpx.post(f"{base}/v1/runs/{run_id}/events", content=body).status_code == 200
        # The write-behind journal flushes every 50 ms: the kill comes once the delta is on disk.
        wait_until(lambda: on_disk(tmp_path, run_id) == 1, 10, "the delta in the journal's file")
        proc.kill()
        proc.wait()
    with gateway_process(*journal_args(tmp_path)) as (base, _):
        events = envelopes(read_stream(base, run_id))
        assert [e["kind"] for e in events] == ["content_delta", "completion"]
        assert events[-1]["data"] == {"status": "failed", "reason": "server_restarted"}


def test_a_signal_stops_the_server_with_128_plus_its_number() -> None:
    """The exit status says which signal stopped the server, every time (it used to depend on
    where asyncio's runner met the re-raised signal: 130 or 0)."""
    for sig, status in [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGINT, 130)]:
        with gateway_process() as (_, proc):
            proc.send_signal(sig)
            assert proc.wait(15) == status
            assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
