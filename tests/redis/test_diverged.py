"""Redis loses writes it acknowledged, and an owner cannot be reached (issue 33, R1).

A Redis rolled back (an AOF or snapshot older than what it acknowledged, a failover with
``replicas=0``) still says the run is running and its owner's: the owner's next commit was
refused ("another instance appended to it"), its producer stopped, and nobody ended the run —
watchers waited for good, the thread refused its next run (409) and cancel answered "nothing to
cancel". Now the owner ends such a run itself, with one terminal event after every seq it gave
out, and a cancel whose owner does not answer ends the run from where it was sent (which
sends the run's webhook).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import redis
from httpx_sse import connect_sse

from tests.fakes.redis_server import RedisProcess
from tests.gateway.sse_client import envelopes, read_stream
from tests.gateway.webhook_receiver import receiving
from tests.redis.test_instances import deltas, instances, push
from tests.waiting import wait_until


def reading(base: str, run_id: str) -> tuple[threading.Thread, list[Any]]:
    """A client streaming the run in the background, event by event, until its end."""
    seen: list[Any] = []

    def read() -> None:
        with (
            httpx.Client(base_url=base, timeout=60) as client,
            connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
        ):
            seen.extend(json.loads(event.data) for event in source.iter_sse())

    reader = threading.Thread(target=read)
    reader.start()
    return reader, seen


def finished(base: str, run_id: str) -> dict[str, Any] | None:
    info: dict[str, Any] = httpx.get(f"{base}/v1/runs/{run_id}").json()
    return info if info["state"] == "finished" else None


def test_a_redis_rolled_back_under_an_owner_ends_its_run_once(tmp_path: Path) -> None:
    with (
        RedisProcess("--dir", str(tmp_path), "--save", "", "--appendonly", "no") as server,
        instances(server.url, 2) as procs,
    ):
        (a, _), (b, _) = procs
        start = {"source": "ingest", "thread_id": "diverged"}
        run_id = httpx.post(f"{a}/v1/runs", json=start).json()["id"]
        push(a, run_id, *deltas(0, 3))
        redis.Redis(port=server.port).save()  # what Redis comes back with: seqs 1-3
        push(a, run_id, *deltas(3, 6))  # acknowledged, and shown: seqs 4-6
        owners_client, on_a = reading(a, run_id)
        wait_until(lambda: len(on_a) == 6, 20, "the owner's client at seq 6")
        server.kill()
        server.start()  # back at the snapshot: the run is running, A's, at seq 3
        # A's next commit finds the stream behind it: the push is not acknowledged.
        answer = httpx.post(
            f"{a}/v1/runs/{run_id}/events",
            content='{"kind": "content_delta", "data": {"delta": "t6"}}\n',
            timeout=30,
        )
        assert answer.status_code != 200
        info = wait_until(lambda: finished(b, run_id), 30, "the run's end")
        assert info["status"] == "failed" and info["last_seq"] == 8
        # One terminal event, after every seq a client was given (7: the refused push's).
        history = envelopes(read_stream(b, run_id))
        assert [e["seq"] for e in history] == [1, 2, 3, 8]
        assert history[-1]["data"] == {"status": "failed", "reason": "journal_diverged"}
        owners_client.join(30)
        assert not owners_client.is_alive()
        assert [e["seq"] for e in on_a] == [1, 2, 3, 4, 5, 6, 8]
        assert on_a[-1] == history[-1]
        resumed = read_stream(a, run_id, headers={"last-event-id": "6"})
        assert envelopes(resumed) == [history[-1]]
        # Nothing is left holding on: cancel is a no-op, the thread takes its next run.
        cancel = httpx.post(f"{b}/v1/runs/{run_id}/cancel", timeout=30).json()
        assert cancel["accepted"] is False and "already finished" in cancel["detail"]
        nxt = httpx.post(f"{b}/v1/runs", json={**start, "source": "ingest"})
        assert nxt.status_code == 201, nxt.text


def cancel_unanswered(
    owned: tuple[str, subprocess.Popen[bytes]],
    b: str,
    start: dict[str, Any],
    started: dict[str, Any] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """An ingest run started on A (``started``, else ``start``) with three events, followed
    by a client of B; A stopped (SIGSTOP: alive, its lease too, but it answers nothing) and
    the run cancelled from B: it ends ``owner_unreachable`` and its thread takes ``start``
    again. The run's id, and what B's client got."""
    a, owner = owned
    run_id = httpx.post(f"{a}/v1/runs", json=started or start).json()["id"]
    push(a, run_id, *deltas(0, 3))
    watcher, on_b = reading(b, run_id)
    wait_until(lambda: len(on_b) == 3, 20, "B's client at seq 3")
    os.kill(owner.pid, signal.SIGSTOP)
    try:
        cancel = httpx.post(f"{b}/v1/runs/{run_id}/cancel", timeout=60).json()
        assert cancel["accepted"] is True and "did not answer" in cancel["detail"], cancel
        watcher.join(30)
        assert not watcher.is_alive()
        assert [e["seq"] for e in on_b] == [1, 2, 3, 4]
        assert on_b[-1]["data"] == {"status": "cancelled", "reason": "owner_unreachable"}
        nxt = httpx.post(f"{b}/v1/runs", json=start)
        assert nxt.status_code == 201, nxt.text
    finally:
        os.kill(owner.pid, signal.SIGCONT)
    return run_id, on_b


def test_a_cancel_its_owner_does_not_answer_ends_the_run() -> None:
    with (
        receiving() as (hooks, receiver),
        RedisProcess("--save", "", "--appendonly", "no") as server,
        # A lease that outlasts the wait for an answer (10 s): the owner is alive throughout.
        instances(
            f"{server.url}?lease=60", 2, env={"LOOPGATE_ALLOWED_OUTBOUND": f"{hooks}/hook/"}
        ) as procs,
    ):
        (a, owner), (b, _) = procs
        start = {"source": "ingest", "thread_id": "unanswered"}
        hooked = {**start, "webhook": f"{hooks}/hook/unanswered"}
        run_id, on_b = cancel_unanswered((a, owner), b, start, hooked)
        # The owner, woken, applies the cancel it was sent; its end is refused (the run has
        # one), and its own clients get the run's one end from the journal.
        assert envelopes(read_stream(a, run_id)) == on_b
        # Its webhook came from B, whose write ended the run; the owner's end sent none.
        posted = receiver.delivered("unanswered")
        assert (posted["id"], posted["reason"]) == (run_id, "owner_unreachable")
        assert posted["status"] == "cancelled"
    assert len(receiver.of("unanswered")) == 1
