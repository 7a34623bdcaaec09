"""Three `loopgate serve` processes sharing runs through one Redis (docs/scale.md).

Runs here are ingest runs (what a test pushes is what every instance must show) and replays
of recordings: what they stream does not depend on the reference loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, Any

import anyio
import httpx
import pytest
from httpx_sse import connect_sse

from tests.gateway.harness import REPO, free_port, stop, wait_healthy
from tests.gateway.sse_client import aread_stream, envelopes, read_stream


@contextmanager
def instances(
    redis_url: str,
    count: int,
    *flags: str,
    env: dict[str, str] | None = None,
    log_files: list[IO[bytes]] | None = None,
) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """``count`` gateways on one Redis, started side by side (each takes seconds to import),
    each with ``flags`` and the environment plus ``env``; ``log_files`` gets each one's
    stderr file, for a test that reads what it logged.

    Each one's stderr goes to a file of its own, never to a pipe: nothing reads a pipe while a
    test runs, and a gateway that has filled one (64 KiB: a few hundred audit lines) stops
    dead in its next log write, with every request it holds."""
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    with ExitStack() as files:
        logs: list[IO[bytes]] = []
        try:
            for _ in range(count):
                port = free_port()
                args = ["serve", "--port", str(port), "--journal", redis_url, *flags]
                logs.append(files.enter_context(tempfile.TemporaryFile()))
                proc = subprocess.Popen(
                    [sys.executable, "-m", "loopgate", *args],
                    cwd=REPO,
                    env={**os.environ, **(env or {})},
                    stdout=subprocess.DEVNULL,
                    stderr=logs[-1],
                )
                procs.append((f"http://127.0.0.1:{port}", proc))
            for (base, proc), log in zip(procs, logs, strict=True):
                wait_healthy(base, proc, timeout=60, log=log)
            if log_files is not None:
                log_files += logs
            yield procs
        finally:
            for _, proc in procs:
                stop(proc)


@pytest.fixture(scope="module")
def trio(redis_server: str) -> Iterator[list[str]]:
    """Three instances the tests that end no instance share (each starts in seconds)."""
    sep = "&" if "?" in redis_server else "?"
    with instances(f"{redis_server}{sep}prefix=t{uuid.uuid4().hex[:12]}", 3) as procs:
        yield bases(procs)


def bases(procs: list[tuple[str, subprocess.Popen[bytes]]]) -> list[str]:
    return [base for base, _ in procs]


def push(base: str, run_id: str, *events: dict[str, Any]) -> None:
    body = "".join(json.dumps(e) + "\n" for e in events)
    response = httpx.post(f"{base}/v1/runs/{run_id}/events", content=body, timeout=20)
    assert response.status_code == 200, response.text


def deltas(start: int, count: int) -> list[dict[str, Any]]:
    return [{"kind": "content_delta", "data": {"delta": f"t{i}"}} for i in range(start, count)]


def first_events(base: str, run_id: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of a live stream, then the connection is dropped."""
    out: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=base, timeout=20) as client,
        connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
    ):
        for event in source.iter_sse():
            out.append(json.loads(event.data))
            if len(out) == count:
                break
    return out


def test_a_run_started_on_one_instance_is_listed_described_and_streamed_on_another(
    trio: list[str],
) -> None:
    a, b, _ = trio
    started = httpx.post(f"{a}/v1/runs", json={"replay": "one-tool-round"})
    run_id = started.json()["id"]
    on_b = envelopes(read_stream(b, run_id))
    on_a = envelopes(read_stream(a, run_id))
    assert on_b == on_a
    assert [e["seq"] for e in on_b] == list(range(1, len(on_b) + 1))
    assert on_b[-1]["kind"] == "completion"
    info = httpx.get(f"{b}/v1/runs/{run_id}").json()
    assert info["state"] == "finished" and info["last_seq"] == len(on_a)
    assert run_id in [r["id"] for r in httpx.get(f"{b}/v1/runs").json()["runs"]]
    resumed = read_stream(b, run_id, headers={"last-event-id": "3"})
    assert envelopes(resumed) == on_a[3:]


def test_start_on_a_stream_from_b_cancel_from_c(trio: list[str]) -> None:
    a, b, c = trio
    run_id = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
    seen: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: seen.extend(envelopes(read_stream(b, run_id))))
    reader.start()
    push(a, run_id, *deltas(0, 20))
    # Under way, as B sees it: then C cancels it.
    assert len(first_events(b, run_id, 20)) == 20
    answer = httpx.post(f"{c}/v1/runs/{run_id}/cancel").json()
    assert answer["accepted"] is True
    reader.join(20)
    assert not reader.is_alive()
    assert [e["seq"] for e in seen] == list(range(1, 22))
    assert seen[-1]["data"] == {"status": "cancelled", "reason": "cancelled_by_client"}
    assert envelopes(read_stream(c, run_id)) == seen
    # Once it has ended, a command is a no-op everywhere, not an error.
    for base in (a, b, c):
        assert httpx.post(f"{base}/v1/runs/{run_id}/cancel").json()["accepted"] is False


def test_pushes_to_any_instance_reach_the_run_in_order(trio: list[str]) -> None:
    a, b, _ = trio
    run_id = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
    push(a, run_id, *deltas(0, 10))
    push(b, run_id, *deltas(10, 20))  # B forwards to A, which owns the run
    push(b, run_id, {"kind": "completion", "data": {"status": "completed"}})
    seen = envelopes(read_stream(b, run_id))
    assert [e["seq"] for e in seen] == list(range(1, 22))
    assert [e["data"] for e in seen[:20]] == [d["data"] for d in deltas(0, 20)]
    assert envelopes(read_stream(a, run_id)) == seen


def test_a_killed_owner_leaves_its_run_to_be_ended_once_by_a_survivor(redis_url: str) -> None:
    with instances(redis_url + "&lease=1", 3) as procs:
        (a, proc_a), (b, _), (c, _) = procs
        run_id = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
        push(a, run_id, *deltas(0, 30))
        before = first_events(b, run_id, 12)
        # Mid-run, as B's client saw it: the owner dies without a word.
        proc_a.kill()
        proc_a.wait()
        rest = envelopes(read_stream(b, run_id, headers={"last-event-id": "12"}))
        whole = before + rest
        assert [e["seq"] for e in whole] == list(range(1, 32))
        assert [e["data"] for e in whole[:30]] == [d["data"] for d in deltas(0, 30)]
        assert whole[-1]["data"] == {"status": "failed", "reason": "owner_lost"}
        assert [e["kind"] for e in whole].count("completion") == 1
        # Every survivor tells the same story, from the start.
        assert envelopes(read_stream(c, run_id)) == whole
        assert httpx.get(f"{c}/v1/runs/{run_id}").json()["status"] == "failed"


def test_an_instance_that_shuts_down_leaves_other_instances_runs_alone(redis_url: str) -> None:
    with instances(redis_url, 2) as procs:
        (a, _), (b, proc_b) = procs
        run_id = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
        push(a, run_id, *deltas(0, 5))
        before = first_events(b, run_id, 5)
        # B is following the run for a client when it shuts down.
        with (
            httpx.Client(base_url=b, timeout=20) as client,
            connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
        ):
            assert source.response.status_code == 200
            assert stop(proc_b) == 130  # SIGINT's exit status, after a graceful shutdown
        push(a, run_id, *deltas(5, 10), {"kind": "completion", "data": {"status": "completed"}})
        # B ended nothing: the client resumes on A where it left off.
        rest = envelopes(read_stream(a, run_id, headers={"last-event-id": "5"}))
        assert [e["data"] for e in before + rest] == [
            *[d["data"] for d in deltas(0, 10)],
            {"status": "completed"},
        ]


def test_a_hundred_clients_over_three_instances_receive_identical_streams(
    trio: list[str],
) -> None:
    hosts = trio
    run_id = httpx.post(f"{hosts[0]}/v1/runs", json={"source": "ingest"}).json()["id"]
    push(hosts[0], run_id, *deltas(0, 10))  # some history before they join
    streams = anyio.run(follow_with_many, hosts, run_id, 100)
    expected = [*[d["data"] for d in deltas(0, 310)], {"status": "completed"}]
    assert len(streams) == 100
    for stream in streams:
        assert [e["seq"] for e in stream] == list(range(1, 312))
        assert [e["data"] for e in stream] == expected
    assert all(stream == streams[0] for stream in streams)


async def follow_with_many(hosts: list[str], run_id: str, count: int) -> list[list[Any]]:
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    clients = [httpx.AsyncClient(base_url=h, timeout=30, limits=limits) for h in hosts]
    streams: list[list[Any]] = []
    try:
        async with anyio.create_task_group() as tg:

            async def follow(client: httpx.AsyncClient) -> None:
                streams.append(envelopes(await aread_stream(client, run_id)))

            for i in range(count):
                tg.start_soon(follow, clients[i % len(clients)])
            # Every client is subscribed (as each instance counts them) before the rest comes.
            while True:
                watching = 0
                for client in clients:
                    watching += (await client.get(f"/v1/runs/{run_id}")).json()["subscribers"]
                if watching == count:
                    break
                await anyio.sleep(0.02)
            owner = clients[0]
            for start in range(10, 310, 50):
                lines = deltas(start, start + 50)
                body = "".join(json.dumps(e) + "\n" for e in lines)
                assert (
                    await owner.post(f"/v1/runs/{run_id}/events", content=body)
                ).status_code == 200
            done = json.dumps({"kind": "completion", "data": {"status": "completed"}}) + "\n"
            assert (await owner.post(f"/v1/runs/{run_id}/events", content=done)).status_code == 200
    finally:
        for client in clients:
            await client.aclose()
    return streams
