"""Finished runs in memory: retained bytes per event, and the full-GC pause they cause.

    .venv/bin/python -m benchmarks.retention [--runs 1000] [--source scripted|recordings]
                                             [--gc-rounds 9] [--quick]

A hub built as ``loopgate serve`` builds it (``loopgate.gateway.app.build_hub``, the memory journal,
default settings but ``scripted_delay_s=0`` and ``max_runs`` = the number of runs), in this
process, holds ``--runs`` finished runs:

  scripted    the reference loop's default turn on the embedded scripted model (reasoning,
              text, two parallel tool calls, a second round), each run its own prompt
  recordings  replays of the recorded streams in conformance/streams/, in turn

Each run is read to its end by one subscriber (the way a client sees it), which also sums the
encoded size of every envelope: ``encode_envelope`` bytes, the JSON a native SSE client gets in
``data:``. Then, with every run finished and ``gc.collect()`` done:

  retained    tracemalloc's traced memory after − before filling (every Python allocation the
              hub, journal, runs and threads still hold), per event, against the encoded bytes
              per event; the RSS growth of a second, untraced fill is shown beside it (coarser:
              allocator arenas, fragmentation, freed memory not returned)
  gc pause    ``gc.collect()`` (all generations), timed ``--gc-rounds`` times: median and range,
              with the runs held (the verdict), with the hub empty (most of a full collection
              is the heap the imports built: pydantic, OpenTelemetry, MCP…), and with the runs
              held but the start-up heap frozen first (``gc.freeze()``): the runs' own share;
              and gc-tracked objects per event

Targets (issue #15): retained bytes per event ≤ 1.5× the encoded size; full-GC pause ≤ 10 ms
with 1,000 finished runs retained.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from benchmarks._common import fmt_range, median_range, rss_kib, say, table  # noqa: E402
from loopgate.contracts.envelope import encode_envelope  # noqa: E402
from loopgate.contracts.ports import StartRun  # noqa: E402
from loopgate.gateway.app import build_hub  # noqa: E402
from loopgate.gateway.hub import Hub  # noqa: E402
from loopgate.gateway.settings import Settings  # noqa: E402

SOURCES = ("scripted", "recordings")
CONCURRENT = 32  # runs under way at once while filling (below max_active_runs)
TARGET_RATIO = 1.5
TARGET_GC_MS = 10.0


def requests(source: str, runs: int) -> list[StartRun]:
    if source == "scripted":
        # A different prompt per run, as real traffic has: the default scenario, varied wording.
        return [
            StartRun(input=f"What time is it, and what is {12 + i % 80} * {3 + i % 17}? (#{i})")
            for i in range(runs)
        ]
    names = sorted(p.stem for p in (ROOT / "conformance" / "streams").glob("*.jsonl"))
    return [
        StartRun(source="replay", replay=names[i % len(names)], replay_pace="fast")
        for i in range(runs)
    ]


@dataclass
class Fill:
    runs: int = 0
    events: int = 0
    encoded_bytes: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


async def fill(hub: Hub, batch: list[StartRun], out: Fill) -> None:
    """Start every run (``CONCURRENT`` at a time) and read each to its end."""
    limiter = anyio.Semaphore(CONCURRENT)

    async def one(request: StartRun) -> None:
        async with limiter:
            run_id = (await hub.start(request)).id
            async with hub.subscribe(run_id) as sub:
                while not sub.done:
                    for envelope in await sub.next_batch():
                        out.events += 1
                        out.encoded_bytes += len(encode_envelope(envelope))
                        if envelope.kind == "completion":
                            status = str(envelope.data.get("status"))
                            out.statuses[status] = out.statuses.get(status, 0) + 1
            out.runs += 1

    async with anyio.create_task_group() as tg:
        for request in batch:
            tg.start_soon(one, request)


def settings_for(runs: int) -> Settings:
    return Settings(scripted_delay_s=0, max_runs=runs, max_dropped_ids=runs)


def gc_pause_ms(rounds: int) -> list[float]:
    pauses = []
    for _ in range(rounds):
        start = time.perf_counter()
        gc.collect()
        pauses.append((time.perf_counter() - start) * 1e3)
    return pauses


@dataclass
class Result:
    source: str
    fill: Fill
    traced_bytes: int
    rss_kib: int
    hub_accounted: int
    gc_empty_ms: list[float]
    gc_full_ms: list[float]
    gc_frozen_ms: list[float]
    tracked_objects: int

    @property
    def encoded_per_event(self) -> float:
        return self.fill.encoded_bytes / self.fill.events

    @property
    def retained_per_event(self) -> float:
        return self.traced_bytes / self.fill.events

    @property
    def ratio(self) -> float:
        return self.traced_bytes / self.fill.encoded_bytes


async def measure(source: str, runs: int, gc_rounds: int) -> Result:
    batch = requests(source, runs)
    # Warm: modules, caches and interned strings a first run creates are not the runs' cost.
    async with build_hub(settings_for(runs)) as warm:
        await fill(warm, requests(source, 20), Fill())

    # (1) RSS growth of an untraced fill (tracemalloc's own bookkeeping would swell RSS).
    gc.collect()
    rss_before = rss_kib_self()
    async with build_hub(settings_for(runs)) as hub:
        await fill(hub, batch, Fill())
        gc.collect()
        rss_growth = rss_kib_self() - rss_before
    del hub
    gc.collect()

    # (2) tracemalloc over a second fill; then the GC pauses with the runs still held.
    async with build_hub(settings_for(runs)) as hub:
        gc.collect()
        gc_empty = gc_pause_ms(gc_rounds)
        tracked_before = len(gc.get_objects())
        tracemalloc.start()
        traced_before = tracemalloc.get_traced_memory()[0]
        result = Fill()
        await fill(hub, batch, result)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - traced_before
        tracemalloc.stop()
        tracked = len(gc.get_objects()) - tracked_before
        gc_full = gc_pause_ms(gc_rounds)
        accounted = hub.stats().retained_bytes
        assert result.runs == runs, (result.runs, runs)
    del hub
    gc.collect()

    # (3) The runs' own share of the pause: the heap as it stands (imports, the hub) frozen
    # first, as a server that calls gc.freeze() after start-up would have it.
    gc.freeze()
    try:
        async with build_hub(settings_for(runs)) as hub:
            await fill(hub, batch, Fill())
            gc.collect()
            gc_frozen = gc_pause_ms(gc_rounds)
    finally:
        gc.unfreeze()
    return Result(
        source, result, traced, rss_growth, accounted, gc_empty, gc_full, gc_frozen, tracked
    )


def rss_kib_self() -> int:
    import os

    return rss_kib(os.getpid())


def report(results: list[Result]) -> dict[str, bool]:
    rows = []
    for r in results:
        rows.append(
            (
                r.source,
                r.fill.runs,
                f"{r.fill.events:,}",
                f"{r.encoded_per_event:.0f}",
                f"{r.retained_per_event:.0f}",
                f"{r.ratio:.2f}x",
                f"{r.rss_kib * 1024 / r.fill.events:.0f}",
                f"{r.hub_accounted / r.fill.events:.0f}",
                f"{r.tracked_objects / r.fill.events:.1f}",
            )
        )
    table(
        "retained memory, bytes per event",
        (
            "source",
            "runs",
            "events",
            "encoded",
            "retained (tracemalloc)",
            "retained / encoded",
            "RSS growth",
            "hub's own count",
            "gc-tracked objects/event",
        ),
        rows,
    )
    table(
        "full gc.collect(), ms: median (lowest … highest)",
        ("source", "hub empty", "finished runs held", "runs held, start-up heap frozen"),
        [
            (
                r.source,
                fmt_range(r.gc_empty_ms, ".2f"),
                fmt_range(r.gc_full_ms, ".2f"),
                fmt_range(r.gc_frozen_ms, ".2f"),
            )
            for r in results
        ],
    )
    verdicts: dict[str, bool] = {}
    for r in results:
        verdicts[f"{r.source}: retained <= {TARGET_RATIO}x encoded ({r.ratio:.2f}x)"] = (
            r.ratio <= TARGET_RATIO
        )
        # Judged as `loopgate serve` runs: it freezes its start-up heap before serving.
        pause = median_range(r.gc_frozen_ms)[0]
        verdicts[f"{r.source}: full-GC pause <= {TARGET_GC_MS:g} ms ({pause:.2f} ms)"] = (
            pause <= TARGET_GC_MS
        )
    table(
        "targets",
        ("target", "verdict"),
        [(k, "met" if v else "MISSED") for k, v in verdicts.items()],
    )
    return verdicts


def run(runs: int, sources: list[str], gc_rounds: int) -> list[Result]:
    say(f"python {sys.version.split()[0]}; {runs} finished runs per source")
    results = []
    for source in sources:
        r = anyio.run(measure, source, runs, gc_rounds)
        results.append(r)
        say(
            f"  {source}: {r.fill.runs} runs, {r.fill.events:,} events "
            f"({r.fill.statuses}), encoded {r.encoded_per_event:.0f} B/event, retained "
            f"{r.retained_per_event:.0f} B/event ({r.ratio:.2f}x), full GC "
            f"{fmt_range(r.gc_full_ms, '.2f')} ms"
        )
    report(results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--source", choices=SOURCES, action="append", help="default: both")
    parser.add_argument("--gc-rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="100 runs, 3 GC rounds")
    args = parser.parse_args(argv)
    runs, gc_rounds = (100, 3) if args.quick else (args.runs, args.gc_rounds)
    run(runs, args.source or list(SOURCES), gc_rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
