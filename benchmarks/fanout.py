"""Fan-out: the hub in-process, SSE over loopback vs a plain sse-starlette endpoint, memory.

    .venv/bin/python -m benchmarks.fanout [--quick]

(a) events/s through the hub to 1…1000 in-process subscribers;
(b) real SSE on 127.0.0.1 to 1 and 100 clients: throughput and acceptance→receipt latency;
(c) the same finished stream served by a plain sse-starlette endpoint (the baseline);
(d) resident memory per idle SSE subscriber.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from benchmarks._common import free_port, percentile, rss_kib, server_process, table
from contracts.envelope import Envelope, LoopEvent, encode_envelope
from contracts.ports import StartRun
from gateway.app import build_hub
from gateway.settings import Settings

DELTA = LoopEvent("content_delta", {"delta": "a few words "})
DONE = LoopEvent("completion", {"status": "completed"})


# --- (a) the hub in-process -------------------------------------------------------------------


async def hub_fanout(subscribers: int, events: int) -> tuple[float, float]:
    settings = Settings(
        max_events_per_run=events + 10,
        subscriber_max_lag=events + 10,
        max_subscribers_per_run=subscribers,
        max_batch=4096,
    )
    async with build_hub(settings) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        run = hub.run(run_id)
        received = [0] * subscribers

        async def consume(i: int) -> None:
            async with hub.subscribe(run_id) as sub:
                while not sub.done:
                    received[i] += len(await sub.next_batch())

        async with anyio.create_task_group() as tg:
            for i in range(subscribers):
                tg.start_soon(consume, i)
            await anyio.sleep(0.05)
            started = time.perf_counter()
            publish = hub.publish
            for n in range(events - 1):
                publish(run, DELTA.kind, DELTA.data)
                if not n % 1024:
                    await anyio.lowlevel.checkpoint()  # let subscribers keep up
            publish(run, DONE.kind, DONE.data)
        elapsed = time.perf_counter() - started
        assert received == [events] * subscribers, received[:3]
    return events / elapsed, events * subscribers / elapsed


# --- (b) (c) over real sockets ------------------------------------------------------------------


async def read_sse(client: httpx.AsyncClient, url: str, latencies: list[float] | None) -> int:
    """Count events; with ``latencies``, parse each data line's ts for acceptance→receipt."""
    count = 0
    async with client.stream("GET", url) as response:
        buffer = b""
        async for chunk in response.aiter_raw():
            now = time.time_ns()
            buffer += chunk
            *events, buffer = buffer.split(b"\n\n")
            count += len(events)
            if latencies is not None:
                # A byte search, not json.loads: the client must not be what is measured.
                for raw in events:
                    at = raw.find(b'"ts":')
                    if at >= 0:
                        ts = int(raw[at + 5 : raw.index(b",", at)])
                        latencies.append((now - ts) / 1e6)
    return count


async def sse_clients(url: str, clients: int, latencies: list[float] | None = None) -> list[int]:
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        counts = [0] * clients

        async def one(i: int) -> None:
            counts[i] = await read_sse(client, url, latencies)

        async with anyio.create_task_group() as tg:
            for i in range(clients):
                tg.start_soon(one, i)
    return counts


def start_run(base: str, body: dict[str, Any]) -> str:
    return httpx.post(f"{base}/v1/runs", json=body).json()["id"]


def push(base: str, run_id: str, n: int, end: bool) -> None:
    line = json.dumps({"kind": "content_delta", "data": {"delta": "a few words "}}) + "\n"
    body = line * n + (
        json.dumps({"kind": "completion", "data": {"status": "completed"}}) + "\n" if end else ""
    )
    httpx.post(f"{base}/v1/runs/{run_id}/events", content=body, timeout=60)


def finished_stream_throughput(base: str, url_for: Any, clients: int, events: int) -> float:
    started = time.perf_counter()
    counts = anyio.run(sse_clients, url_for, clients)
    elapsed = time.perf_counter() - started
    assert all(c >= events for c in counts), counts[:3]
    return events * clients / elapsed


def live_latency(base: str, clients: int, events: int, rate: int) -> tuple[float, float]:
    run_id = start_run(base, {"source": "ingest"})
    latencies: list[float] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sse_clients, f"{base}/v1/runs/{run_id}/events", clients, latencies)
            await anyio.sleep(0.5)
            async with httpx.AsyncClient(timeout=60) as client:
                per_tick = max(1, rate // 100)
                line = json.dumps({"kind": "content_delta", "data": {"delta": "x"}}) + "\n"
                for _ in range(events // per_tick):
                    await client.post(f"{base}/v1/runs/{run_id}/events", content=line * per_tick)
                    await anyio.sleep(0.01)
                await client.post(
                    f"{base}/v1/runs/{run_id}/events",
                    content=json.dumps({"kind": "completion", "data": {"status": "completed"}}),
                )

    anyio.run(main)
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


BASELINE_APP = """
import json, sys
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.responses import PlainTextResponse

lines = open(sys.argv[1], "rb").read().splitlines()
events = [json.loads(l) for l in lines]

async def stream(request):
    n = int(request.query_params.get("n", len(events)))
    chosen = events[: n - 1] + events[-1:]

    async def gen():
        for e in chosen:
            data = json.dumps(e, separators=(",", ":"))
            yield {"id": str(e["seq"]), "event": e["kind"], "data": data}
    # LF separators, as an AG-UI/EventSource client needs; CRLF is sse-starlette's default.
    return EventSourceResponse(gen(), sep="\\n", ping=15)

async def health(request):
    return PlainTextResponse("ok")

app = Starlette(routes=[Route("/events", stream), Route("/healthz", health)])
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = parser.parse_args()
    events = 20_000 if args.quick else 100_000

    rows = []
    for subs in (1, 10, 100, 1000):
        n = events if subs <= 10 else events // 10
        publish_rate, delivered = anyio.run(hub_fanout, subs, n)
        rows.append((subs, n, f"{publish_rate:,.0f}", f"{delivered:,.0f}"))
    table(
        "(a) hub fan-out in-process",
        ("subscribers", "events", "events/s published", "deliveries/s"),
        rows,
    )

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    stream_events = 10_000 if args.quick else 50_000
    # Every client reads the whole finished run; 100 clients read a tenth each, so the slow
    # baseline still finishes well inside the client timeout.
    sizes = {1: stream_events, 100: stream_events // 10}
    serve = [
        sys.executable,
        "-m",
        "gateway.cli",
        "serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--max-subscribers-per-run",
        "2000",
        # 1,000 idle subscribers and the requests beside them: past the default cap of 1,000.
        "--max-connections",
        "4000",
        "--max-body-bytes",
        str(64 << 20),
    ]
    with server_process(serve, port, "/healthz") as proc:
        ours = {}
        for c in (1, 100):
            run_id = start_run(base, {"source": "ingest"})
            push(base, run_id, sizes[c] - 1, end=True)
            ours[c] = finished_stream_throughput(
                base, f"{base}/v1/runs/{run_id}/events", c, sizes[c]
            )
        lat = {c: live_latency(base, c, 2000 if args.quick else 5000, 1000) for c in (1, 100)}

        idle_run = start_run(base, {"source": "ingest"})
        before = rss_kib(proc.pid)
        idle = 200 if args.quick else 1000

        async def hold_idle() -> int:
            async with httpx.AsyncClient(
                timeout=30, limits=httpx.Limits(max_connections=idle + 10)
            ) as c:
                streams = []
                for _ in range(idle):
                    cm = c.stream("GET", f"{base}/v1/runs/{idle_run}/events")
                    streams.append(cm)
                    await cm.__aenter__()
                await anyio.sleep(1.0)
                after = rss_kib(proc.pid)
                push(base, idle_run, 0, end=True)
                for cm in streams:
                    await cm.__aexit__(None, None, None)
                return after

        after = anyio.run(hold_idle)
    per_sub = (after - before) / idle

    recording = Path("/tmp/loopgate-fanout-baseline.jsonl")
    # The same stream for the baseline: identical envelopes as our server sent them.
    lines = [
        encode_envelope(
            Envelope(
                "run",
                i,
                time.time_ns(),
                "completion" if i == stream_events else "content_delta",
                {"status": "completed"} if i == stream_events else {"delta": "a few words "},
            )
        )
        for i in range(1, stream_events + 1)
    ]
    recording.write_bytes(b"\n".join(lines) + b"\n")
    app_file = Path("/tmp/loopgate_fanout_baseline_app.py")
    app_file.write_text(BASELINE_APP)
    bport = free_port()
    baseline_cmd = [
        sys.executable,
        "-c",
        f"import sys; sys.argv=['x', {str(recording)!r}]; sys.path.insert(0, '/tmp');"
        f"import uvicorn, loopgate_fanout_baseline_app as m;"
        f"uvicorn.run(m.app, host='127.0.0.1', port={bport}, log_level='warning')",
    ]
    with server_process(baseline_cmd, bport, "/healthz"):
        baseline = {
            c: finished_stream_throughput(
                f"http://127.0.0.1:{bport}",
                f"http://127.0.0.1:{bport}/events?n={sizes[c]}",
                c,
                sizes[c],
            )
            for c in (1, 100)
        }

    table(
        f"(b)+(c) SSE over loopback, a finished run ({sizes[1]:,} events to 1 client, "
        f"{sizes[100]:,} to each of 100), events/s received",
        ("clients", "loopgate", "sse-starlette", "ratio"),
        [
            (c, f"{ours[c]:,.0f}", f"{baseline[c]:,.0f}", f"{ours[c] / baseline[c]:.2f}x")
            for c in (1, 100)
        ],
    )
    table(
        "(b) live latency, acceptance → receipt (1,000 events/s pushed)",
        ("clients", "p50 ms", "p99 ms"),
        [(c, f"{lat[c][0]:.2f}", f"{lat[c][1]:.2f}") for c in (1, 100)],
    )
    table(
        "(d) memory per idle SSE subscriber",
        ("subscribers", "RSS growth KiB", "KiB each"),
        [(idle, after - before, f"{per_sub:.1f}")],
    )


if __name__ == "__main__":
    main()
