"""(d) of benchmarks/scale_out.py: how long runs wait in the run queue shared through Redis, with
1, 2 and 3 worker instances behind one ``--role api`` instance.

Each deployment (an api instance and N workers, ``--max-active-runs`` each, on one Redis with
a prefix of its own) gets a burst of loop runs (the scripted model, a short answer) started at
once on the api instance; a run's queue wait is accepted → first event: the envelope's ``ts``
(the worker's clock, on this machine) minus the time the client had its ``201``. Reported: p50
and p99 over the burst, the median over the rounds, and each p99 as a ratio of one worker's.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field

import httpx

from benchmarks import _common as bench

WORKERS = (1, 2, 3)
PROMPT = "plain hi"


@dataclass
class QueueSizes:
    rounds: int = 3
    runs: int = 60  # per burst
    room: int = 2  # --max-active-runs of each worker
    delay_s: float = 0.005  # the scripted model's pause between deltas


@dataclass
class QueueReport:
    # workers → (p50, p99) of each round, ms
    waits: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


async def burst(api: str, runs: int) -> list[float]:
    """``runs`` starts at once on ``api``; each one's accepted → first event, ms."""
    async with httpx.AsyncClient(base_url=api, timeout=120) as http:

        async def one() -> float:
            answer = await http.post("/v1/runs", json={"input": PROMPT})
            accepted = time.time_ns()
            answer.raise_for_status()
            run_id = answer.json()["id"]
            async with http.stream("GET", f"/v1/runs/{run_id}/events") as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        return (json.loads(line[5:])["ts"] - accepted) / 1e6
            raise RuntimeError(f"run {run_id}: its stream ended without an event")

        return list(await asyncio.gather(*(one() for _ in range(runs))))


def measure(redis_url: str, sizes: QueueSizes, report: QueueReport) -> None:
    for workers in WORKERS:
        prefix = f"benchq{workers}-{uuid.uuid4().hex[:8]}"
        journal = ["--journal", f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}"]
        ports = [bench.free_port() for _ in range(workers + 1)]
        common = [*journal, "--scripted-delay", str(sizes.delay_s)]
        roles = [["--role", "api"]] + [
            ["--role", "worker", "--max-active-runs", str(sizes.room)]
        ] * workers
        servers = [
            (bench.serve_argv(port, *common, *role), port, "/healthz")
            for port, role in zip(ports, roles, strict=True)
        ]
        with bench.server_processes(servers):
            api = f"http://127.0.0.1:{ports[0]}"
            asyncio.run(burst(api, sizes.room))  # warm: connections, the agent's first run
            for n in range(sizes.rounds):
                try:
                    waits = asyncio.run(burst(api, sizes.runs))
                except Exception as exc:  # reported; the rest goes on
                    report.failures.append(f"queue wait, {workers} workers: {exc!r}")
                    bench.say(f"  (d) round {n + 1}, {workers} workers: FAILED {exc!r}")
                    continue
                p50, p99 = bench.percentile(waits, 0.5), bench.percentile(waits, 0.99)
                report.waits.setdefault(workers, []).append((p50, p99))
                shown = f"p50 {p50:.0f} ms, p99 {p99:.0f} ms"
                bench.say(f"  (d) round {n + 1}, {workers} workers: {shown}")


def print_queue(report: QueueReport, sizes: QueueSizes) -> None:
    one = [p99 for _, p99 in report.waits.get(1, [])]
    rows = []
    for workers in WORKERS:
        got = report.waits.get(workers, [])
        p99s = [p99 for _, p99 in got]
        ratio = "—"
        if p99s and one:
            ratio = f"{bench.median_range(p99s)[0] / bench.median_range(one)[0]:.2f}×"
        p50s = [p50 for p50, _ in got]
        rows.append((workers, bench.fmt_range(p50s), bench.fmt_range(p99s), ratio))
    bench.table(
        f"(d) queue wait, accepted → first event, ms: {sizes.runs} runs started at once on an "
        f"api instance, workers with room for {sizes.room} each (median (range) of rounds)",
        ("workers", "p50", "p99", "p99 vs 1 worker"),
        rows,
    )
    for failure in report.failures:
        print(f"FAILED: {failure}")
