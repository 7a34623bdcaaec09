"""Telemetry overhead: events/s through the hub with tracing off vs on, side by side.

    .venv/bin/python -m benchmarks.telemetry_overhead [--processes 5] [--scale 0.5] [--quick]

Each run is an ingest run into which a recorded stream is published (``Hub.publish``, the hot
path), with one in-process subscriber (consumer ``sse``) reading every event, so delivery
telemetry is exercised too. Modes, all exporting through a ``BatchSpanProcessor`` into an
exporter that discards everything (the cost loopgate adds, not the network's):

  off      no telemetry
  worker   the default: the hub side queues what happened, the trace worker process builds
           and exports the spans (its CPU is reported apart: it runs on another core)
  inline   ``trace_worker=false``: spans built and exported in the gateway's process
  +content content capture on (worker)

Workloads:

  recorded        all 20 conformance recordings in turn (the scripted model: few, large deltas)
  model-streamed  a hosted model's turn: 2 model requests of 250 deltas around 2 tool calls
  deltas-only     benchmarks/fanout.py's workload: 1000 content deltas
  tool-heavy      stress: a span opens or closes on 2 of every 3 events (instant tools)

Every mode has its own hub in one event loop and they take turns, one pass (a run per stream)
at a time, so whatever else slows the machine (a 2-core VM here: samples vary by ±40 %) hits
every mode alike. Rates are events per CPU-second of the gateway's process: the event loop's
thread while it ran that mode's pass, with the worker modes' flushes (the task that sends
the queue to the worker) billed to their own mode whenever they ran. The worker process's
own CPU is shown apart (µs per event): it runs on another core. Target: ≤ 15 % fewer
events/s with telemetry on (default mode).

A process's memory layout alone moves its rates, and the modes' ratio, by several per cent,
so each sample is a fresh process (``--processes``): the median and range are reported.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import anyio.lowlevel  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from benchmarks._common import table  # noqa: E402
from contracts.envelope import Envelope  # noqa: E402
from contracts.ports import StartRun  # noqa: E402
from gateway.app import build_hub  # noqa: E402
from gateway.hub import Hub  # noqa: E402
from gateway.settings import Settings  # noqa: E402
from gateway.telemetry import Telemetry  # noqa: E402
from gateway.telemetry.golden import STREAMS, load_stream  # noqa: E402
from gateway.telemetry.worker import DiscardExporter, WorkerSink, WorkerSpec  # noqa: E402

MODES = ("off", "worker", "inline", "+content")
CHILD = [sys.executable, "-m", "benchmarks.telemetry_overhead", "--child"]
TARGET = 0.15
# Workloads the target is about; tool-heavy is a stress case, shown for what it shows.
REALISTIC = ("recorded", "model-streamed", "deltas-only")


def tool_heavy(n: int = 90) -> list[Envelope]:
    out: list[Envelope] = []
    for i in range(n // 3):
        call = {"id": f"c{i}", "name": "calculate", "round": 1, "arguments": {"e": "1+1"}}
        out.append(Envelope("t", 0, 0, "tool_call_start", call))
        out.append(Envelope("t", 0, 0, "content_delta", {"delta": "x"}))
        result = {"id": f"c{i}", "name": "calculate", "success": True, "resultPreview": "2"}
        out.append(Envelope("t", 0, 0, "tool_call_result", result))
    out.append(Envelope("t", 0, 0, "completion", {"status": "completed"}))
    return out


def model_streamed(deltas: int = 250) -> list[Envelope]:
    """A turn as a hosted model streams it (one delta per token or two): two model requests
    of ``deltas`` deltas each around two tool calls."""
    out: list[Envelope] = []
    for round_ in (1, 2):
        out.append(Envelope("m", 0, 0, "stage_start", {"model": "gpt-x", "round": round_}))
        out.append(Envelope("m", 0, 0, "llm_request", {"round": round_, "model": "gpt-x"}))
        out += [Envelope("m", 0, 0, "content_delta", {"delta": "tok "})] * deltas
        usage = {"promptTokens": 100, "completionTokens": deltas, "finishReason": "stop"}
        out.append(Envelope("m", 0, 0, "llm_response", {"round": round_, **usage}))
        if round_ == 1:
            for i in range(2):
                call = {"id": f"c{i}", "name": "clock", "round": 1, "arguments": {}}
                out.append(Envelope("m", 0, 0, "tool_call_start", call))
            for i in range(2):
                result = {"id": f"c{i}", "name": "clock", "success": True, "resultPreview": "1"}
                out.append(Envelope("m", 0, 0, "tool_call_result", result))
            out.append(Envelope("m", 0, 0, "completion", {"status": "executing"}))
    out.append(Envelope("m", 0, 0, "completion", {"status": "completed"}))
    return out


def deltas_only(n: int = 1000) -> list[Envelope]:
    """benchmarks/fanout.py's workload: one long answer, deltas only (no model request)."""
    delta = Envelope("d", 0, 0, "content_delta", {"delta": "a few words "})
    return [delta] * (n - 1) + [Envelope("d", 0, 0, "completion", {"status": "completed"})]


def workloads() -> dict[str, tuple[list[list[Envelope]], int]]:
    """Name → (the streams of one pass, passes: ~1 s of hub time per mode)."""
    recorded = [load_stream(p) for p in sorted(STREAMS.glob("*.jsonl"))]
    return {
        "recorded": (recorded, 300),
        "model-streamed": ([model_streamed()], 1_500),
        "deltas-only": ([deltas_only()], 1_000),
        "tool-heavy": ([tool_heavy()], 3_000),
    }


class MeteredSink(WorkerSink):
    """The worker sink, with the CPU time of its flushes counted. Every hub's flush task runs
    on the one event loop, so a flush may land in another mode's pass: :func:`interleaved`
    takes it out of that pass and bills it to this sink's mode."""

    cpu_s = 0.0

    def flush_batch(self) -> bool:
        started = time.thread_time()
        try:
            return super().flush_batch()
        finally:
            self.cpu_s += time.thread_time() - started


def flushed(telemetries: dict[str, Telemetry | None]) -> float:
    return sum(t.sink.cpu_s for t in telemetries.values() if t and isinstance(t.sink, MeteredSink))


def make_telemetry(mode: str) -> Telemetry | None:
    if mode == "off":
        return None
    if mode == "inline":
        return Telemetry(BatchSpanProcessor(DiscardExporter()), owns_processor=True)
    content = mode == "+content"
    return Telemetry(sink=MeteredSink(WorkerSpec(discard=True, content=content)), content=content)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def worker_startup_cpu() -> float:
    """CPU of a worker that starts, is sent nothing and stops (imports, mostly)."""
    costs = []
    for _ in range(3):
        before = children_cpu()
        Telemetry(sink=WorkerSink(WorkerSpec(discard=True))).shutdown()
        costs.append(children_cpu() - before)
    return min(costs)


async def one_pass(hub: Hub, streams: list[list[Envelope]]) -> int:
    """One run per stream, each published in full and read by one subscriber."""
    events = 0
    for stream in streams:
        run = hub.run((await hub.start(StartRun(source="ingest"))).id)
        done = anyio.Event()

        async def consume(run_id: str = run.id, done: anyio.Event = done) -> None:
            async with hub.subscribe(run_id, consumer="sse") as sub:
                while not sub.done:
                    await sub.next_batch()
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.lowlevel.checkpoint()
            publish = hub.publish
            for n, env in enumerate(stream):
                publish(run, env.kind, env.data)
                if not n % 64:
                    await anyio.lowlevel.checkpoint()
            hub.end_producer(run)  # a recording that stops short (truncated)
            await done.wait()
        events += len(stream)
    return events


async def interleaved(
    telemetries: dict[str, Telemetry | None],
    streams: list[list[Envelope]],
    passes: int,
    seed: int,
) -> dict[str, tuple[float, int]]:
    """Mode → (CPU seconds of the event loop's thread, events), one pass per mode in turn."""
    cpu = dict.fromkeys(telemetries, 0.0)
    events = dict.fromkeys(telemetries, 0)
    settings = Settings(max_runs=passes * len(streams) + 10, max_active_runs=8)
    async with AsyncExitStack() as stack:
        hubs = {
            mode: await stack.enter_async_context(build_hub(settings, telemetry=telemetry))
            for mode, telemetry in telemetries.items()
        }
        modes = list(hubs)
        # A shuffled order each round: a fixed rotation aliases with the garbage collector's
        # allocation-count triggers and can bill one mode for every collection.
        rng = random.Random(seed)
        for _ in range(passes):
            # The runs every hub keeps grow the heap; a full collection over all of it would
            # land on whichever mode happens to run. Frozen, it is out of every collection,
            # so each pass pays only for collecting what it allocates itself.
            gc.collect()
            gc.freeze()
            rng.shuffle(modes)
            for mode in modes:
                started, flushes = time.thread_time(), flushed(telemetries)
                events[mode] += await one_pass(hubs[mode], streams)
                cpu[mode] += time.thread_time() - started - (flushed(telemetries) - flushes)
    gc.unfreeze()
    return {mode: (cpu[mode], events[mode]) for mode in modes}


def measure(
    streams: list[list[Envelope]], passes: int, seed: int = 7
) -> dict[str, tuple[float, float | None]]:
    """Mode → (events per CPU-second of the gateway's process, worker CPU µs per event)."""
    startup = worker_startup_cpu()
    telemetries = {mode: make_telemetry(mode) for mode in MODES}
    counted = anyio.run(interleaved, telemetries, streams, passes, seed)
    out: dict[str, tuple[float, float | None]] = {}
    for mode, telemetry in telemetries.items():
        cpu, events = counted[mode]
        worker_us = None
        if telemetry is not None:
            before = children_cpu()
            telemetry.shutdown()
            if isinstance(telemetry.sink, MeteredSink):
                cpu += telemetry.sink.cpu_s
                worker_us = max(children_cpu() - before - startup, 0.0) / events * 1e6
        out[mode] = (events / cpu, worker_us)
    return out


def child(scale: float, seed: int) -> dict[str, dict[str, tuple[float, float | None]]]:
    """One process's measurement: workload → mode → (events/s, worker µs/event)."""
    return {
        name: measure(streams, max(1, round(passes * scale)), seed)
        for name, (streams, passes) in workloads().items()
    }


def run_children(processes: int, scale: float) -> list[dict[str, dict[str, list[Any]]]]:
    """Each measurement in a fresh process: a process's memory layout alone moves its rates
    by up to ±20 % here, so one process is one sample and the median is reported."""
    results = []
    for n in range(processes):
        done = subprocess.run(
            [*CHILD, str(n), "--scale", str(scale)],
            cwd=ROOT,
            capture_output=True,
            check=True,
            text=True,
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"  process {n + 1}/{processes} measured", file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=5, help="samples, one process each")
    parser.add_argument("--scale", type=float, default=0.5, help="passes per process × this")
    parser.add_argument("--quick", action="store_true", help="2 processes at --scale 0.1")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.scale, args.child)))
        return 0
    if args.quick:
        args.processes, args.scale = 2, 0.1
    samples = run_children(args.processes, args.scale)
    rows = []
    worst = 0.0
    fmt: Callable[[float], str] = "{:,.0f}".format
    for name, (streams, _) in workloads().items():
        offs = [sample[name]["off"][0] for sample in samples]
        events = sum(len(s) for s in streams)
        for mode in MODES[1:]:
            overheads = [1 - s[name][mode][0] / s[name]["off"][0] for s in samples]
            overhead = statistics.median(overheads)
            rate = statistics.median(s[name][mode][0] for s in samples)
            worker = [s[name][mode][1] for s in samples if s[name][mode][1] is not None]
            if mode == "worker" and name in REALISTIC:
                worst = max(worst, overhead)
            rows.append(
                (
                    name,
                    f"{events / len(streams):.0f}",
                    mode,
                    fmt(statistics.median(offs)),
                    fmt(rate),
                    f"{overhead * 100:+.1f} %",
                    f"{min(overheads) * 100:+.1f} … {max(overheads) * 100:+.1f} %",
                    f"{statistics.median(worker):.2f}" if worker else "-",
                )
            )
    table(
        f"events per CPU-second of the gateway's process, 1 subscriber, modes interleaved; "
        f"median of {len(samples)} processes",
        (
            "workload",
            "events/run",
            "telemetry",
            "off ev/s",
            "on ev/s",
            "overhead",
            "range",
            "worker µs/ev",
        ),
        rows,
    )
    verdict = "met" if worst <= TARGET else "NOT met"
    print(
        f"\nworst median overhead, default mode (worker), {', '.join(REALISTIC)}: "
        f"{worst * 100:.1f} % (target ≤ {TARGET * 100:.0f} %: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
