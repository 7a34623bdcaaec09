"""Scale-out: runs shared through Redis Streams vs the memory journal, 1 and 2 instances.

    .venv/bin/python -m benchmarks.scale_out [--quick] [--rounds 3]

Side by side in one run, rounds interleaved (the order rotates each round), each cell the
median and range over the rounds:

  memory ×1   ``loopgate serve`` with the memory journal (the default; nothing shared)
  redis ×1    ``--journal redis://…``, one instance
  redis ×2    ``--journal redis://…``, two instances on the same Redis: runs started on both,
              each pushed to its owner; live readers spread over both instances

(a) Ingest: NDJSON pushes (``POST /v1/runs/{id}/events``, 500 events per request) into 1 run
    and into 100 runs at once; events/s accepted (each push answered once committed), for
    the whole deployment and per instance.
(b) Live latency: one ingest run fed at 1,000 events/s (10 events every 10 ms, from a
    separate process) read by 100 SSE clients (spread over the instances); acceptance →
    receipt = the client's receipt time − the envelope's ``ts``; p50 and p99.

Redis: ``LOOPGATE_BENCH_REDIS_URL``, else a ``redis-server`` of its own on a free port (no
persistence), stopped at the end. Targets (issue #20): ≥ 100k events/s ingest per instance;
p99 < 20 ms at 100 clients over 2 instances.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks._common import (  # noqa: E402
    fmt_range,
    free_port,
    median_range,
    percentile,
    say,
    serve_argv,
    server_processes,
    table,
)
from benchmarks.fanout import push_lines, read_sse  # noqa: E402

BATCH = 500
CONFIGS = ("memory ×1", "redis ×1", "redis ×2")
ROUND_TIMEOUT_S = 180.0


@dataclass
class Sizes:
    rounds: int = 3
    events: int = 50_000  # per ingest round, over all its runs
    live_events: int = 3_000  # (b): 3 s at 1,000 events/s
    clients: int = 100
    run_counts: tuple[int, ...] = (1, 100)


@dataclass
class Report:
    # (config, runs) → events/s of each round
    ingest: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    # config → (p50, p99) of each round
    latency: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


@contextmanager
def redis_server() -> Iterator[str]:
    given = os.environ.get("LOOPGATE_BENCH_REDIS_URL")
    if given:
        yield given
        return
    port = free_port()
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


# --- (a) ingest ----------------------------------------------------------------------------------


async def ingest(bases: list[str], runs: int, events: int) -> float:
    """Events/s accepted into ``runs`` ingest runs started round-robin over ``bases``, each
    pushed to the instance that owns it, all at once."""
    limits = httpx.Limits(max_connections=runs + 8, max_keepalive_connections=runs + 8)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        owned: list[tuple[str, str]] = []
        for i in range(runs):
            base = bases[i % len(bases)]
            started = await client.post(f"{base}/v1/runs", json={"source": "ingest"})
            owned.append((base, started.json()["id"]))
        per_run = max(events // runs, 1)
        full = push_lines(BATCH, False)

        async def feed(base: str, run_id: str) -> None:
            sent = 0
            while sent < per_run:
                n = min(BATCH, per_run - sent)
                body = full if n == BATCH else push_lines(n, False)
                response = await client.post(f"{base}/v1/runs/{run_id}/events", content=body)
                response.raise_for_status()
                sent += n
            end = await client.post(f"{base}/v1/runs/{run_id}/events", content=push_lines(0, True))
            end.raise_for_status()

        started_at = time.perf_counter()
        await asyncio.gather(*(feed(base, run_id) for base, run_id in owned))
        return per_run * runs / (time.perf_counter() - started_at)


# --- (b) live latency ----------------------------------------------------------------------------


def live_latency(bases: list[str], clients: int, events: int) -> tuple[float, float]:
    owner = bases[0]
    run_id = httpx.post(f"{owner}/v1/runs", json={"source": "ingest"}).json()["id"]
    latencies: list[float] = []

    def on_frames(frames: list[bytes], now: int) -> None:
        for raw in frames:
            at = raw.find(b'"ts":')
            if at >= 0:
                latencies.append((now - int(raw[at + 5 : raw.index(b",", at)])) / 1e6)

    async def go() -> None:
        connected = [0]
        all_in = asyncio.Event()

        def opened() -> None:
            connected[0] += 1
            if connected[0] == clients:
                all_in.set()

        path = f"/v1/runs/{run_id}/events"
        ports = [int(b.rsplit(":", 1)[1]) for b in bases]
        readers = asyncio.ensure_future(
            asyncio.gather(
                *(read_sse(ports[i % len(ports)], path, on_frames, opened) for i in range(clients))
            )
        )
        async with asyncio.timeout(60):
            await all_in.wait()
            # A client is counted once its response head arrived: subscribed on its instance.
        feed = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.fanout",
            "--pusher",
            json.dumps([owner, run_id, events, 1000]),
            cwd=ROOT,
        )
        try:
            async with asyncio.timeout(ROUND_TIMEOUT_S):
                await feed.wait()
                await readers
        finally:
            if feed.returncode is None:
                feed.kill()
                await feed.wait()
            readers.cancel()

    asyncio.run(go())
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


# --- the run -------------------------------------------------------------------------------------


def run(sizes: Sizes, report: Report) -> None:
    with redis_server() as redis_url:
        tag = uuid.uuid4().hex[:8]
        ports = [free_port() for _ in range(4)]
        servers = [
            (serve_argv(ports[0]), ports[0], "/healthz"),
            (
                serve_argv(ports[1], "--journal", with_prefix(redis_url, f"bench1-{tag}")),
                ports[1],
                "/healthz",
            ),
            *(
                (
                    serve_argv(p, "--journal", with_prefix(redis_url, f"bench2-{tag}")),
                    p,
                    "/healthz",
                )
                for p in ports[2:]
            ),
        ]
        with server_processes(servers):
            urls = [f"http://127.0.0.1:{p}" for p in ports]
            deployments = {
                "memory ×1": urls[:1],
                "redis ×1": urls[1:2],
                "redis ×2": urls[2:],
            }
            for n in range(sizes.rounds):
                order = CONFIGS[n % 3 :] + CONFIGS[: n % 3]
                for config in order:
                    bases = deployments[config]
                    for runs in sizes.run_counts:
                        try:
                            rate = asyncio.run(ingest(bases, runs, sizes.events))
                        except Exception as exc:  # reported; the rest goes on
                            report.failures.append(f"{config} ingest {runs}: {exc!r}")
                            say(f"  (a) round {n + 1} {config}, {runs} runs: FAILED {exc!r}")
                            continue
                        report.ingest.setdefault((config, runs), []).append(rate)
                        say(f"  (a) round {n + 1} {config}, {runs:>3} runs: {rate:,.0f} events/s")
                    try:
                        p50, p99 = live_latency(bases, sizes.clients, sizes.live_events)
                    except Exception as exc:
                        report.failures.append(f"{config} latency: {exc!r}")
                        say(f"  (b) round {n + 1} {config}: FAILED {exc!r}")
                        continue
                    report.latency.setdefault(config, []).append((p50, p99))
                    say(
                        f"  (b) round {n + 1} {config}, {sizes.clients} clients: "
                        f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
                    )


def print_report(report: Report, sizes: Sizes) -> None:
    rows = []
    for runs in sizes.run_counts:
        base = report.ingest.get(("memory ×1", runs), [])
        for config in CONFIGS:
            rates = report.ingest.get((config, runs), [])
            instances = 2 if config.endswith("×2") else 1
            ratio = (
                f"{median_range(rates)[0] / median_range(base)[0]:.2f}×" if rates and base else "—"
            )
            rows.append(
                (
                    runs,
                    config,
                    fmt_range(rates),
                    fmt_range([r / instances for r in rates]),
                    ratio,
                )
            )
    table(
        f"(a) ingest, events/s accepted ({sizes.events:,} events per round, {BATCH} per push; "
        "median (range) of rounds)",
        ("runs", "journal", "events/s", "per instance", "vs memory ×1"),
        rows,
    )
    rows = []
    for config in CONFIGS:
        values = report.latency.get(config, [])
        rows.append(
            (
                config,
                fmt_range([v[0] for v in values], ".2f"),
                fmt_range([v[1] for v in values], ".2f"),
            )
        )
    table(
        f"(b) acceptance → receipt at {sizes.clients} SSE clients, 1,000 events/s, ms",
        ("journal", "p50", "p99"),
        rows,
    )
    for failure in report.failures:
        print(f"FAILED: {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = Sizes(rounds=args.rounds)
    if args.quick:
        sizes = Sizes(rounds=1, events=2_000, live_events=300, clients=10)
    report = Report()
    run(sizes, report)
    print_report(report, sizes)
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
