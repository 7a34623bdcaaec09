"""Ingest throughput with the SQLite journal beside the memory journal, in one run.

    .venv/bin/python -m benchmarks.ingest_journal [--rounds 5] [--quick]

Every push is acknowledged only once it is committed (docs/reliability.md#durability), so the
SQLite side pays a commit per acknowledgement, shared by whatever arrived meanwhile.

(a) HTTP NDJSON into two ``loopgate serve`` processes, ``--journal memory`` and ``--journal
    sqlite:…``, from this process (httpx): batches of 1, 10 and 100 events per POST, one pusher,
    and 4 pushers at once (each its own run). CPU is the server process's, per event.
(b) In-process: two hubs in one event loop; a batch is ``push_nowait`` × N and one
    ``wait_committed`` (a batch of 1: ``hub.push``). CPU is this process's (with SQLite's
    worker threads), per event.

Each round measures every case on both journals, alternating which goes first; the tables give
the median of the rounds and the SQLite/memory ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import anyio
import httpx

from benchmarks._common import proc_cpu_s, table
from benchmarks.memory_loads import Server, serve
from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings

JOURNALS = ("memory", "sqlite")
BATCHES = (1, 10, 100)
DELTA = {"kind": "content_delta", "data": {"delta": "a token or two of a streamed answer "}}
LINE = (json.dumps(DELTA) + "\n").encode()
EVENT = LoopEvent(DELTA["kind"], DELTA["data"])
DONE = LoopEvent("completion", {"status": "completed"})
LIMITS = {"max_events_per_run": 10_000_000, "max_active_runs": 1_000}


@dataclass
class Config:
    rounds: int = 5
    # Events per measurement, by batch size (a batch of 1 is a request per event).
    events: dict[int, int] = field(default_factory=lambda: {1: 2_000, 10: 10_000, 100: 40_000})
    pushers: int = 4


@dataclass
class Sample:
    events_per_s: float
    cpu_us_per_event: float


Results = dict[str, dict[str, list[Sample]]]  # case → journal → samples


# --- (a) HTTP NDJSON -----------------------------------------------------------------------


async def push_http(client: httpx.AsyncClient, batch: int, events: int) -> None:
    run_id = (await client.post("/v1/runs", json={"source": "ingest"})).json()["id"]
    body = LINE * batch
    for _ in range(events // batch):
        response = await client.post(f"/v1/runs/{run_id}/events", content=body)
        assert response.status_code == 200, response.text
    await client.post(f"/v1/runs/{run_id}/events?end=1", content=b"")


async def http_case(server: Server, batch: int, events: int, pushers: int) -> Sample:
    limits = httpx.Limits(max_connections=pushers)
    async with httpx.AsyncClient(base_url=server.base, timeout=60, limits=limits) as client:
        await push_http(client, batch, batch)  # a warm connection
        cpu = proc_cpu_s(server.pid)
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(pushers):
                tg.start_soon(push_http, client, batch, events // pushers)
        elapsed = time.perf_counter() - started
        cpu = proc_cpu_s(server.pid) - cpu
    return Sample(events / elapsed, cpu / events * 1e6)


# --- (b) in-process ------------------------------------------------------------------------


async def push_hub(hub: Hub, batch: int, events: int) -> None:
    run_id = (await hub.start(StartRun(source="ingest"))).id
    for _ in range(events // batch):
        if batch == 1:
            await hub.push(run_id, EVENT)
            continue
        for _ in range(batch):
            env = await hub.push_nowait(run_id, EVENT)
        await hub.wait_committed(run_id, env.seq)
    await hub.push(run_id, DONE)


async def hub_case(hub: Hub, batch: int, events: int, pushers: int) -> Sample:
    cpu = time.process_time()
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(pushers):
            tg.start_soon(push_hub, hub, batch, events // pushers)
    elapsed = time.perf_counter() - started
    return Sample(events / elapsed, (time.process_time() - cpu) / events * 1e6)


# --- the run -------------------------------------------------------------------------------


def cases(config: Config) -> Iterator[tuple[str, int, int]]:
    for pushers in (1, config.pushers):
        for batch in BATCHES:
            yield f"{batch} × {pushers}", batch, pushers


async def measure(config: Config, servers: dict[str, Server], hubs: dict[str, Hub]) -> Results:
    http: Results = {}
    inproc: Results = {}
    for round_ in range(config.rounds):
        order = JOURNALS if round_ % 2 == 0 else JOURNALS[::-1]
        for name, batch, pushers in cases(config):
            events = config.events[batch]
            for journal in order:
                sample = await http_case(servers[journal], batch, events, pushers)
                http.setdefault(name, {}).setdefault(journal, []).append(sample)
            for journal in order:
                sample = await hub_case(hubs[journal], batch, events, pushers)
                inproc.setdefault(name, {}).setdefault(journal, []).append(sample)
        print(f"round {round_ + 1}/{config.rounds} done", flush=True)
    return {"http": http, "inproc": inproc}  # type: ignore[dict-item]


def report(results: Results, title: str) -> dict[str, float]:
    rows = []
    ratios = {}
    for name, by_journal in results.items():
        rate = {j: statistics.median(s.events_per_s for s in by_journal[j]) for j in JOURNALS}
        cpu = {j: statistics.median(s.cpu_us_per_event for s in by_journal[j]) for j in JOURNALS}
        ratios[name] = rate["sqlite"] / rate["memory"]
        rows.append(
            [
                name,
                f"{rate['memory']:,.0f}",
                f"{rate['sqlite']:,.0f}",
                f"**{ratios[name]:.2f}**",
                f"{cpu['memory']:.1f}",
                f"{cpu['sqlite']:.1f}",
            ]
        )
    header = ["batch × pushers", "memory ev/s", "sqlite ev/s", "sqlite/memory"]
    header += ["memory CPU µs/ev", "sqlite CPU µs/ev"]
    table(title, header, rows)
    return ratios


async def run(config: Config) -> dict[str, Results]:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        env = {f"LOOPGATE_{k.upper()}": str(v) for k, v in LIMITS.items()}
        servers = {
            "memory": stack.enter_context(serve(env=env)),
            "sqlite": stack.enter_context(serve("--journal", f"sqlite:{tmp}/http.db", env=env)),
        }
        settings = {
            "memory": Settings(**LIMITS),
            "sqlite": Settings(journal=f"sqlite:{tmp}/inproc.db", **LIMITS),
        }
        async with build_hub(settings["memory"]) as memory, build_hub(settings["sqlite"]) as sq:
            return await measure(config, servers, {"memory": memory, "sqlite": sq})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 rounds of fewer events")
    args = parser.parse_args(argv)
    config = Config(rounds=args.rounds)
    if args.quick:
        config = Config(rounds=2, events={1: 400, 10: 2_000, 100: 8_000})
    results = anyio.run(run, config)
    http = report(results["http"], "(a) HTTP NDJSON into `loopgate serve`")
    inproc = report(results["inproc"], "(b) in-process hub.push / push_nowait + wait_committed")
    met = [name for name, ratio in http.items() if not name.startswith("1 ") and ratio >= 0.5]
    wanted = [name for name in http if not name.startswith("1 ")]
    print(
        f"\nTarget: SQLite ≥ 50 % of memory at batches ≥ 10 over HTTP — "
        f"{'met' if met == wanted else 'missed'} ({len(met)}/{len(wanted)} cases); "
        f"in-process: {sum(r >= 0.5 for n, r in inproc.items() if not n.startswith('1 '))}"
        f"/{len(wanted)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
