"""Telemetry overhead: CPU per event through the hub with tracing off vs on, side by side.

    .venv/bin/python -m benchmarks.telemetry_overhead [--processes 5] [--scale 0.5]
        [--rounds 8] [--window 15] [--deltas 250] [--quick]

Spans are built and exported in the gateway's own process (the SDK's ``TracerProvider`` and
``BatchSpanProcessor``), so every figure is all the CPU loopgate spends: the event loop's
thread and the batch processor's export thread.

(1) Throughput. Each run is an ingest run into which a stream is published (``Hub.publish``,
the hot path) as fast as it goes, with one in-process subscriber (consumer ``sse``) reading
every event, so delivery telemetry is exercised too. Modes:

  off       no telemetry
  hooks     loopgate's own share alone: hooks, projector, span bookkeeping, with the SDK's
            spans replaced by ones that do nothing (an attribution, not a way to run)
  on        a batch processor into an exporter that discards the spans
  +content  the same with content capture on
  +otlp     an exporter that encodes each batch to OTLP protobuf, as the OTLP/HTTP exporter
            does before it sends (the network's share is left out)

Workloads:

  recorded        all conformance recordings in turn (the scripted model: few, large deltas)
  model-streamed  a hosted model's turn: 2 model requests of 250 deltas around 2 tool calls
  deltas-only     benchmarks/fanout.py's workload: 1000 content deltas
  tool-heavy      stress: a span opens or closes on 2 of every 3 events (instant tools)

Every mode has its own hub in one event loop and they take turns, one pass (a run per stream)
at a time in shuffled order, so whatever else slows the machine hits every mode alike. A
mode's CPU is the event loop thread's while it ran that mode's pass, plus the whole CPU of its
batch processor's thread (read from that thread's own clock) and of the final flush. A
process's memory layout alone moves the ratio by a few per cent, so each sample is a fresh
process (``--processes``): the median and range are reported. Target: ≤ 3 µs of CPU added per
event on model-streamed.

(2) A realistic rate, served: two `loopgate serve` processes at once, one untraced and one
exporting OTLP/HTTP to a collector in another process (whose CPU is not loopgate's), each
running 50 runs at a time of a ``--loop`` that streams the model-streamed turn at 40 tokens/s
(``--deltas`` per model request: 250 by default, ~13 s a run; a new run as soon as one ends),
every run read over SSE by a client in this process. Both gateways carry the same load at the
same time, so the machine's moods hit both; each gateway's CPU (the whole process and any it
started, and its event loop's thread apart) is read from /proc over each window and divided
by the events its clients received. Target: ≤ 5 % extra CPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import anyio.lowlevel  # noqa: E402
import httpx  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import (  # noqa: E402
    NonRecordingSpan,
    NoOpTracer,
    Span,
    SpanContext,
    TraceFlags,
    Tracer,
)

from benchmarks._common import free_port, proc_cpu_s, serve_argv, server_process, table  # noqa: E402
from conformance.otel import STREAMS, load_stream  # noqa: E402
from loopgate.contracts.envelope import Envelope  # noqa: E402
from loopgate.contracts.ports import StartRun  # noqa: E402
from loopgate.gateway.app import build_hub  # noqa: E402
from loopgate.gateway.hub import Hub  # noqa: E402
from loopgate.gateway.settings import Settings  # noqa: E402
from loopgate.gateway.telemetry import Telemetry  # noqa: E402

MODES = ("off", "hooks", "on", "+content", "+otlp")
CHILD = [sys.executable, "-m", "benchmarks.telemetry_overhead"]
TARGET_US = 3.0
TARGET_RATE = 0.05
RATE_RUNS = 50
RATE_TOKENS_PER_S = 40.0
RATE_DELTAS = 250
# Any of these would make the untraced gateway of (2) trace.
TRACING_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "LOOPGATE_OTEL_ENDPOINT",
    "LOOPGATE_TRACE_CONSOLE",
)


# --- workloads -------------------------------------------------------------------------------


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


# --- exporters and CPU clocks ----------------------------------------------------------------


class DiscardExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class EncodeExporter(SpanExporter):
    """What the OTLP/HTTP exporter does before it sends: the batch as protobuf bytes."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializePartialToString()
        return SpanExportResult.SUCCESS


class Traced:
    """A mode's telemetry and the threads it started (the batch processor's), whose CPU
    clocks say what they spent wherever the event loop was."""

    def __init__(self, make: Callable[[], Telemetry]) -> None:
        before = {t.ident for t in threading.enumerate()}
        self.telemetry = make()
        self.threads = [t for t in threading.enumerate() if t.ident not in before]

    def threads_cpu(self) -> float:
        return sum(
            time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            for t in self.threads
            if t.ident is not None and t.is_alive()
        )

    def flush_cpu(self) -> float:
        """Export what is queued, in this thread: its CPU plus the processor thread's."""
        started = time.thread_time()
        self.telemetry.provider.force_flush()
        return time.thread_time() - started + self.threads_cpu()


class InertTracer(NoOpTracer):
    """Spans that say they record and do nothing else: what is left is loopgate's code."""

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        context = SpanContext(
            random.getrandbits(128), random.getrandbits(64), False, TraceFlags(TraceFlags.SAMPLED)
        )
        return InertSpan(context)


class InertSpan(NonRecordingSpan):
    def is_recording(self) -> bool:
        return True


class InertProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        return InertTracer()


def make_traced(mode: str) -> Traced | None:
    if mode == "off":
        return None
    if mode == "hooks":
        return Traced(lambda: Telemetry(provider=InertProvider(shutdown_on_exit=False)))
    exporter = EncodeExporter() if mode == "+otlp" else DiscardExporter()
    content = mode == "+content"
    # A queue no pass fills: spans the processor dropped would cost nothing.
    return Traced(
        lambda: Telemetry(BatchSpanProcessor(exporter, max_queue_size=1 << 20), content=content)
    )


# --- (1) throughput --------------------------------------------------------------------------


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
    traced: dict[str, Traced | None], streams: list[list[Envelope]], passes: int, seed: int
) -> dict[str, tuple[float, int]]:
    """Mode → (CPU seconds of the event loop's thread, events), one pass per mode in turn."""
    cpu = dict.fromkeys(traced, 0.0)
    events = dict.fromkeys(traced, 0)
    settings = Settings(max_runs=passes * len(streams) + 10, max_active_runs=8)
    async with AsyncExitStack() as stack:
        hubs = {
            mode: await stack.enter_async_context(
                build_hub(settings, telemetry=t.telemetry if t is not None else None)
            )
            for mode, t in traced.items()
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
                started = time.thread_time()
                events[mode] += await one_pass(hubs[mode], streams)
                cpu[mode] += time.thread_time() - started
    gc.unfreeze()
    return {mode: (cpu[mode], events[mode]) for mode in modes}


def measure(streams: list[list[Envelope]], passes: int, seed: int) -> dict[str, float]:
    """Mode → CPU µs per event (the loop's thread, the processor's thread, the last flush)."""
    traced = {mode: make_traced(mode) for mode in MODES}
    counted = anyio.run(interleaved, traced, streams, passes, seed)
    out: dict[str, float] = {}
    for mode, t in traced.items():
        cpu, events = counted[mode]
        if t is not None:
            cpu += t.flush_cpu()
            t.telemetry.shutdown()
        out[mode] = cpu / events * 1e6
    return out


def throughput_child(scale: float, seed: int) -> dict[str, dict[str, float]]:
    return {
        name: measure(streams, max(1, round(passes * scale)), seed)
        for name, (streams, passes) in workloads().items()
    }


# --- (2) a realistic rate --------------------------------------------------------------------


async def paced_loop(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    """The loop both gateways of (2) serve (``--loop``): a model-streamed turn (its deltas
    per model request in the run's ``config``) at RATE_TOKENS_PER_S, as a hosted model's
    stream arrives."""
    interval = 1 / RATE_TOKENS_PER_S
    for env in model_streamed(int(ctx.config.get("deltas", RATE_DELTAS))):
        if env.kind == "content_delta":
            await anyio.sleep(interval)
        yield {"kind": env.kind, "data": env.data}


RECEIVER = """
import http.server
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextmanager
def otlp_receiver() -> Iterator[str]:
    """An OTLP/HTTP collector in another process that takes every export and drops it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.kill()
        proc.wait()


def gateway_argv(port: int, *extra: str) -> list[str]:
    return serve_argv(
        port,
        "--loop",
        "benchmarks.telemetry_overhead:paced_loop",
        "--max-active-runs",
        str(4 * RATE_RUNS),
        *extra,
    )


async def keep_running(base: str, received: list[int], deltas: int) -> None:
    """RATE_RUNS runs at a time on one gateway, each read over SSE to its end; a new run as
    soon as one ends, until cancelled. ``received[0]`` counts the events read."""
    limits = httpx.Limits(max_connections=2 * RATE_RUNS + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def slot(i: int) -> None:
            await anyio.sleep(i / RATE_RUNS / RATE_TOKENS_PER_S)  # spread over one token
            while True:
                body = {"input": "go", "config": {"deltas": deltas}}
                run = (await client.post(f"{base}/v1/runs", json=body)).json()
                url = f"{base}/v1/runs/{run['id']}/events"
                async with client.stream("GET", url) as response:
                    async for chunk in response.aiter_raw():
                        received[0] += chunk.count(b"\n\n")

        async with anyio.create_task_group() as tg:
            for i in range(RATE_RUNS):
                tg.start_soon(slot, i)


def thread_cpu_s(pid: int, tid: int) -> float:
    """utime + stime of one thread of a process, in seconds."""
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and of every process under it (a gateway that spawned
    helpers, as loopgate's trace worker was, is charged for them)."""
    total = proc_cpu_s(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        total += sum(tree_cpu_s(int(child)) for child in children)
    return total


# One measured window of one gateway: CPU of the process and its children, of its event
# loop's thread (the main thread), and the events its clients received.
Window = tuple[float, float, int]


async def served(
    bases: dict[str, str],
    pids: dict[str, int],
    rounds: int,
    window_s: float,
    warmup_s: float,
    deltas: int,
) -> dict[str, list[Window]]:
    """Gateway → its windows; both gateways under the same load at once."""
    received = {mode: [0] for mode in bases}
    out: dict[str, list[Window]] = {mode: [] for mode in bases}
    async with anyio.create_task_group() as tg:
        for mode, base in bases.items():
            tg.start_soon(keep_running, base, received[mode], deltas)
        await anyio.sleep(warmup_s)
        for _ in range(rounds):
            before = {
                m: (tree_cpu_s(p), thread_cpu_s(p, p), received[m][0]) for m, p in pids.items()
            }
            await anyio.sleep(window_s)
            for mode, pid in pids.items():
                cpu, main, events = before[mode]
                out[mode].append(
                    (
                        tree_cpu_s(pid) - cpu,
                        thread_cpu_s(pid, pid) - main,
                        received[mode][0] - events,
                    )
                )
        tg.cancel_scope.cancel()  # runs still streaming are not measured
    return out


def rate_measure(
    rounds: int, window_s: float, warmup_s: float, deltas: int
) -> dict[str, list[Window]]:
    """(2): an untraced and a traced ``loopgate serve`` side by side, the same load on each."""
    with otlp_receiver() as collector:
        off_port, on_port = free_port(), free_port()
        with (
            server_process(gateway_argv(off_port), off_port, "/healthz") as off,
            server_process(
                gateway_argv(on_port, "--otel-endpoint", collector), on_port, "/healthz"
            ) as on,
        ):
            bases = {"off": f"http://127.0.0.1:{off_port}", "on": f"http://127.0.0.1:{on_port}"}
            pids = {"off": off.pid, "on": on.pid}
            return anyio.run(served, bases, pids, rounds, window_s, warmup_s, deltas)


# --- the report ------------------------------------------------------------------------------


def run_child(args: list[str]) -> Any:
    done = subprocess.run([*CHILD, *args], cwd=ROOT, capture_output=True, check=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def span(values: list[float], fmt: str) -> str:
    return f"{fmt.format(min(values))} … {fmt.format(max(values))}"


def report_throughput(samples: list[dict[str, dict[str, float]]]) -> float:
    rows = []
    for name, (streams, _) in workloads().items():
        off = [s[name]["off"] for s in samples]
        for mode in MODES[1:]:
            added = [s[name][mode] - s[name]["off"] for s in samples]
            ratio = [s[name][mode] / s[name]["off"] - 1 for s in samples]
            rows.append(
                (
                    name,
                    f"{sum(len(s) for s in streams) / len(streams):.0f}",
                    mode,
                    f"{statistics.median(off):.3f}",
                    f"{statistics.median(s[name][mode] for s in samples):.3f}",
                    f"{statistics.median(added):+.3f}",
                    span(added, "{:+.3f}"),
                    f"{statistics.median(ratio) * 100:+.1f} %",
                    span([r * 100 for r in ratio], "{:+.1f}") + " %",
                )
            )
    table(
        f"(1) CPU µs per event (all of loopgate's threads), 1 subscriber, modes interleaved; "
        f"median of {len(samples)} processes",
        (
            "workload",
            "events/run",
            "telemetry",
            "off µs/ev",
            "on µs/ev",
            "added µs/ev",
            "range",
            "extra CPU",
            "range",
        ),
        rows,
    )
    return max(
        statistics.median(s["model-streamed"][mode] - s["model-streamed"]["off"] for s in samples)
        for mode in ("on", "+otlp")
    )


def report_rate(result: dict[str, list[Window]], window_s: float, deltas: int) -> float:
    """The extra CPU over all windows (total CPU per total event, on vs off); per window too."""
    per_event = {
        mode: [cpu / max(events, 1) * 1e6 for cpu, _, events in windows]
        for mode, windows in result.items()
    }
    events = {mode: max(sum(w[2] for w in windows), 1) for mode, windows in result.items()}
    overall = {mode: sum(w[0] for w in result[mode]) / events[mode] * 1e6 for mode in result}
    loop_thread = {mode: sum(w[1] for w in result[mode]) / events[mode] * 1e6 for mode in result}
    off, on = per_event["off"], per_event["on"]
    pairs = [b / a - 1 for a, b in zip(off, on, strict=True)]
    extra = overall["on"] / overall["off"] - 1
    table(
        f"(2) {RATE_RUNS} runs at {RATE_TOKENS_PER_S:.0f} tokens/s (2 × {deltas} deltas a run) "
        f"on each of two `loopgate serve` at once, read over SSE, the traced one exporting "
        f"OTLP/HTTP; gateway process CPU µs per event delivered, {len(off)} windows of "
        f"{window_s:.0f} s",
        (
            "telemetry",
            "µs/event",
            "event loop thread",
            "other threads, processes",
            "per window",
            "extra CPU",
            "per window",
        ),
        [
            (
                mode,
                f"{overall[mode]:.2f}",
                f"{loop_thread[mode]:.2f}",
                f"{overall[mode] - loop_thread[mode]:.2f}",
                span(per_event[mode], "{:.2f}"),
                f"{extra * 100:+.1f} %" if mode == "on" else "",
                span([p * 100 for p in pairs], "{:+.1f}") + " %" if mode == "on" else "",
            )
            for mode in ("off", "on")
        ],
    )
    return extra


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--processes", type=int, default=5, help="(1): samples, one process each (0: skip)"
    )
    parser.add_argument("--scale", type=float, default=0.5, help="(1): passes per process × this")
    parser.add_argument("--rounds", type=int, default=8, help="(2): measured windows (0: skip)")
    parser.add_argument("--window", type=float, default=15.0, help="(2): seconds per window")
    parser.add_argument("--warmup", type=float, default=15.0, help="(2): seconds before the first")
    parser.add_argument(
        "--deltas", type=int, default=RATE_DELTAS, help="(2): deltas per model request"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run of both parts")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(throughput_child(args.scale, args.child)))
        return 0
    if args.quick:
        args.processes, args.scale, args.rounds, args.window, args.warmup = 2, 0.05, 2, 3, 3
    traced_by_env = [k for k in TRACING_VARIABLES if os.environ.get(k)]
    if traced_by_env:
        print(
            f"unset {', '.join(traced_by_env)}: the untraced gateway would trace", file=sys.stderr
        )
        return 2
    samples = []
    for n in range(args.processes):
        samples.append(run_child(["--child", str(n), "--scale", str(args.scale)]))
        print(f"  (1) process {n + 1}/{args.processes} measured", file=sys.stderr, flush=True)
    rate = rate_measure(args.rounds, args.window, args.warmup, args.deltas) if args.rounds else None
    if samples:
        added = report_throughput(samples)
        print(
            f"\nmodel-streamed, CPU added per event: {added:.2f} µs "
            f"(target ≤ {TARGET_US:.0f} µs: {'met' if added <= TARGET_US else 'NOT met'})"
        )
    if rate is None:
        return 0
    extra = report_rate(rate, args.window, args.deltas)
    print(
        f"{RATE_RUNS} runs × {RATE_TOKENS_PER_S:.0f} tokens/s, extra CPU: {extra * 100:.1f} % "
        f"(target ≤ {TARGET_RATE * 100:.0f} %: {'met' if extra <= TARGET_RATE else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
