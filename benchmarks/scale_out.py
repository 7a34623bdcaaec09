"""Scale-out: runs shared through Redis Streams or PostgreSQL (+ a Redis bus) vs the memory
and SQLite journals, 1 and 2 instances.

    .venv/bin/python -m benchmarks.scale_out [--quick] [--rounds 3] [--only-queue]

Side by side in one run, rounds interleaved (the order rotates each round), each cell the
median and range over the rounds:

  memory ×1   ``loopgate serve`` with the memory journal (the default; nothing shared)
  redis ×1    ``--journal redis://…``, one instance
  redis ×2    ``--journal redis://…``, two instances on the same Redis: runs started on both,
              each pushed to its owner; live readers spread over both instances
  sqlite ×1   ``--journal sqlite:…`` (the single-machine durable journal)
  postgres ×1 / ×2  ``--journal postgresql://… --bus redis://…``: events committed in
              PostgreSQL, Redis only for leases, commands and the doorbell of live fan-out

(a) Ingest: NDJSON pushes (``POST /v1/runs/{id}/events``, 500 events per request) into 1 run
    and into 100 runs at once; events/s accepted (each push answered once committed), for
    the whole deployment and per instance.
(b) Live latency: one ingest run fed at 1,000 events/s (10 events every 10 ms, from a
    separate process) read by 100 SSE clients (spread over the instances); acceptance →
    receipt = the client's receipt time − the envelope's ``ts``; p50 and p99.

Redis: ``LOOPGATE_BENCH_REDIS_URL``, else a ``redis-server`` of its own on a free port (no
persistence), stopped at the end; PostgreSQL: ``LOOPGATE_BENCH_POSTGRES_URL``, else a postgres
of its own (tests/fakes/postgres_server.py: initdb in a temporary directory, ``fsync=off``: it
measures the journal's work, not a disk; with a real one each group commit waits for an
fsync). Targets (issue #20): ≥ 100k events/s ingest per instance;
p99 < 20 ms at 100 clients over 2 instances.

(d) Queue wait (benchmarks/queue_wait.py): a burst of runs on a ``--role api`` instance, taken
    by 1, 2 and 3 ``--role worker`` instances; accepted → first event, p50 and p99
    (``--only-queue``: this part alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
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
import redis  # noqa: E402

from benchmarks._common import (  # noqa: E402
    RawHttp,
    fmt_range,
    free_port,
    median_range,
    percentile,
    rss_kib,
    say,
    serve_argv,
    server_processes,
    table,
    tree_cpu_s,
)
from benchmarks.fanout import push_lines, read_sse  # noqa: E402
from benchmarks.queue_wait import QueueReport, QueueSizes, measure, print_queue  # noqa: E402

BATCH = 500
CONFIGS = ("memory ×1", "sqlite ×1", "redis ×1", "redis ×2", "postgres ×1", "postgres ×2")
ROUND_TIMEOUT_S = 180.0


@dataclass
class Sizes:
    rounds: int = 3
    events: int = 50_000  # per ingest round, over all its runs
    live_events: int = 3_000  # (b): 3 s at 1,000 events/s
    clients: int = 100
    run_counts: tuple[int, ...] = (1, 100)
    # (c): runs added before each RSS reading
    memory_runs: tuple[int, ...] = (500, 500, 1000)


@dataclass
class Report:
    # (config, runs) → each round's figures
    ingest: dict[tuple[str, int], list[Ingest]] = field(default_factory=dict)
    # config → (p50, p99) of each round
    latency: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # (c) the reading instance's RSS in KiB after each batch of runs
    memory: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@contextmanager
def tempfile_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="loopgate-bench-") as tmp:
        yield Path(tmp)


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


@contextmanager
def postgres_server() -> Iterator[str]:
    given = os.environ.get("LOOPGATE_BENCH_POSTGRES_URL")
    if given:
        yield given
        return
    from tests.fakes.postgres_server import PostgresProcess

    with PostgresProcess() as server:
        yield server.url


def with_prefix(url: str, prefix: str) -> str:
    return with_param(url, "prefix", prefix)


def with_param(url: str, name: str, value: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{name}={value}"


# --- (a) ingest ----------------------------------------------------------------------------------


@dataclass
class Ingest:
    rate: float  # events/s accepted, the whole deployment
    gateway_us: float  # CPU of every instance, per event
    redis_us: float  # CPU of redis-server, per event (its INFO cpu)
    client_us: float  # CPU of the pushing client (this process), per event

    @property
    def per_instance_core(self) -> float:
        """Events per CPU-second of a gateway process: what one instance accepts on a core
        of its own (a process runs Python on one core at a time); inf when a round was too
        short for the CPU clock's ticks."""
        return 1e6 / self.gateway_us if self.gateway_us else math.inf


def redis_cpu_s(url: str | None) -> float:
    if url is None:
        return 0.0
    info = redis.Redis.from_url(url).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def ingest(
    bases: list[str], procs: list[int], redis_url: str | None, runs: int, events: int
) -> Ingest:
    """``runs`` ingest runs started round-robin over ``bases``, each pushed to the instance
    that owns it over a keep-alive connection of its own, all at once, then ended."""
    owned: list[tuple[int, str]] = []
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(runs):
            base = bases[i % len(bases)]
            started = await client.post(f"{base}/v1/runs", json={"source": "ingest"})
            owned.append((int(base.rsplit(":", 1)[1]), started.json()["id"]))
    per_run = max(events // runs, 1)
    full = push_lines(BATCH, False)

    async def feed(port: int, run_id: str) -> None:
        path = f"/v1/runs/{run_id}/events"
        whole = RawHttp.post_bytes(path, full)
        async with RawHttp(port) as http:
            sent = 0
            while sent < per_run:
                n = min(BATCH, per_run - sent)
                request = whole if n == BATCH else RawHttp.post_bytes(path, push_lines(n, False))
                status, body = await http.send(request)
                if status != 200:
                    raise RuntimeError(f"push to {run_id}: {status} {body[:200]!r}")
                sent += n
            status, body = await http.send(RawHttp.post_bytes(path, push_lines(0, True)))
            if status != 200:
                raise RuntimeError(f"end of {run_id}: {status} {body[:200]!r}")

    cpu = [tree_cpu_s(pid) for pid in procs]
    redis_before = redis_cpu_s(redis_url)
    client_before = time.process_time()
    started_at = time.perf_counter()
    await asyncio.gather(*(feed(port, run_id) for port, run_id in owned))
    elapsed = time.perf_counter() - started_at
    client_s = time.process_time() - client_before
    redis_s = redis_cpu_s(redis_url) - redis_before
    gateway_s = sum(tree_cpu_s(pid) for pid in procs) - sum(cpu)
    total = per_run * runs
    return Ingest(
        total / elapsed, gateway_s / total * 1e6, redis_s / total * 1e6, client_s / total * 1e6
    )


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


# --- (c) memory per instance vs the runs in Redis -----------------------------------------------


def memory_bound(bases: list[str], procs: list[int], run_counts: tuple[int, ...]) -> list[int]:
    """For each count: that many more finished runs of 100 events, pushed to the first
    instance, each then streamed whole from the second; the second's RSS (KiB) after."""
    owner, reader = bases[0], bases[1]
    port = int(reader.rsplit(":", 1)[1])
    body = push_lines(99, True)
    rss: list[int] = []

    async def go(count: int) -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            for _ in range(count):
                run_id = (await client.post(f"{owner}/v1/runs", json={"source": "ingest"})).json()[
                    "id"
                ]
                pushed = await client.post(f"{owner}/v1/runs/{run_id}/events", content=body)
                pushed.raise_for_status()
                if await read_sse(port, f"/v1/runs/{run_id}/events") != 100:
                    raise RuntimeError(f"run {run_id}: not 100 events from the second instance")

    for count in run_counts:
        asyncio.run(go(count))
        rss.append(rss_kib(procs[1]))
    return rss


# --- the run -------------------------------------------------------------------------------------


def run(sizes: Sizes, report: Report) -> None:
    with redis_server() as redis_url, postgres_server() as postgres_url, tempfile_dir() as tmp:
        tag = uuid.uuid4().hex[:8]
        flags: list[list[str]] = [
            ["--journal", "memory"],
            ["--journal", f"sqlite:{tmp / 'journal.sqlite3'}"],
            *(["--journal", with_prefix(redis_url, f"bench{n}-{tag}")] for n in (1, 2, 2)),
            *(
                ["--journal", with_param(postgres_url, "schema", f"bench{n}_{tag}"), "--bus",
                 with_prefix(redis_url, f"benchpg{n}-{tag}")]
                for n in (1, 2, 2)
            ),
        ]  # fmt: skip
        ports = [free_port() for _ in flags]
        servers = [(serve_argv(p, *f), p, "/healthz") for p, f in zip(ports, flags, strict=True)]
        with server_processes(servers) as procs:
            urls = [f"http://127.0.0.1:{p}" for p in ports]
            pids = [proc.pid for proc in procs]
            deployments = {
                "memory ×1": (urls[:1], pids[:1], None),
                "sqlite ×1": (urls[1:2], pids[1:2], None),
                "redis ×1": (urls[2:3], pids[2:3], redis_url),
                "redis ×2": (urls[3:5], pids[3:5], redis_url),
                "postgres ×1": (urls[5:6], pids[5:6], redis_url),
                "postgres ×2": (urls[6:], pids[6:], redis_url),
            }
            for n in range(sizes.rounds):
                turn = n % len(CONFIGS)
                order = CONFIGS[turn:] + CONFIGS[:turn]
                for config in order:
                    bases, config_pids, url = deployments[config]
                    for runs in sizes.run_counts:
                        try:
                            got = asyncio.run(ingest(bases, config_pids, url, runs, sizes.events))
                        except Exception as exc:  # reported; the rest goes on
                            report.failures.append(f"{config} ingest {runs}: {exc!r}")
                            say(f"  (a) round {n + 1} {config}, {runs} runs: FAILED {exc!r}")
                            continue
                        report.ingest.setdefault((config, runs), []).append(got)
                        say(
                            f"  (a) round {n + 1} {config}, {runs:>3} runs: {got.rate:,.0f} "
                            f"events/s; CPU µs/event: gateway {got.gateway_us:.2f}, "
                            f"redis {got.redis_us:.2f}, client {got.client_us:.2f}"
                        )
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
            bases, config_pids, _ = deployments["redis ×2"]
            try:
                report.memory = memory_bound(bases, config_pids, sizes.memory_runs)
            except Exception as exc:
                report.failures.append(f"memory: {exc!r}")
                say(f"  (c) FAILED {exc!r}")
            else:
                say(f"  (c) RSS of the reading instance: {report.memory} KiB")


def print_report(report: Report, sizes: Sizes) -> None:
    rows = []
    for runs in sizes.run_counts:
        anchors = [
            [g.rate for g in report.ingest.get((anchor, runs), [])]
            for anchor in ("memory ×1", "sqlite ×1", "redis ×1")
        ]
        for config in CONFIGS:
            got = report.ingest.get((config, runs), [])
            rates = [g.rate for g in got]
            ratios = [
                f"{median_range(rates)[0] / median_range(base)[0]:.2f}×" if rates and base else "—"
                for base in anchors
            ]
            rows.append(
                (
                    runs,
                    config,
                    fmt_range(rates),
                    *ratios,
                    fmt_range([g.gateway_us for g in got], ".2f"),
                    fmt_range([g.redis_us for g in got], ".2f"),
                    fmt_range([g.client_us for g in got], ".2f"),
                    fmt_range([g.per_instance_core for g in got]),
                )
            )
    table(
        f"(a) ingest ({sizes.events:,} events per round, {BATCH} per push; median (range) "
        "of rounds): events/s accepted, CPU µs per event of each process, and events per "
        "CPU-second of an instance",
        (
            "runs",
            "journal",
            "events/s",
            "vs memory ×1",
            "vs sqlite ×1",
            "vs redis ×1",
            "gateway µs",
            "redis µs",
            "client µs",
            "per instance core",
        ),
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
    if report.memory:
        total = 0
        rows = []
        for count, kib in zip(sizes.memory_runs, report.memory, strict=True):
            total += count
            rows.append((f"{total:,}", f"{kib / 1024:.1f}"))
        table(
            "(c) redis ×2: runs of 100 events pushed to one instance and streamed whole from "
            "the other; the other's RSS after",
            ("runs in Redis", "RSS MiB"),
            rows,
        )
    for failure in report.failures:
        print(f"FAILED: {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only-queue", action="store_true", help="only (d), the queue wait")
    args = parser.parse_args(argv)
    sizes = Sizes(rounds=args.rounds)
    queue_sizes = QueueSizes(rounds=args.rounds)
    if args.quick:
        sizes = Sizes(rounds=1, events=2_000, live_events=300, clients=10, memory_runs=(20, 20))
        queue_sizes = QueueSizes(rounds=1, runs=12)
    report = Report()
    if not args.only_queue:
        run(sizes, report)
        print_report(report, sizes)
    queued = QueueReport()
    with redis_server() as redis_url:
        measure(redis_url, queue_sizes, queued)
    print_queue(queued, queue_sizes)
    return 1 if report.failures or queued.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
