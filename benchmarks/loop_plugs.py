"""Loop plugs: events/s and added latency per event through each way a loop plugs in.

    .venv/bin/python -m benchmarks.loop_plugs [--events N] [--repeat K] [--rate R]
        [--delivery-window-ms W] [--quick]

Five hubs, each built from its plug's settings as ``loopgate serve`` builds it
(``loopgate.gateway.app.build_hub``), run side by side in one event loop; every run is started with
``hub.start(StartRun(input=…))`` and read by one ``hub.subscribe(run_id)`` subscriber
(``next_batch()``), the path every front end takes:

  reference  anchor: the reference CoreLoop in-process, on a benchmark ModelProvider that streams
             N TextChunks as fast as it can (the loop's real work per delta)
  python     anchor: ``--loop``, an in-process async generator yielding N content_delta events
  python-thread  the same generator with ``--loop-runner thread``: driven in a worker thread,
             each event handed to the gateway's event loop
  http       ``--loop-url``: a uvicorn + Starlette NDJSON server in another process
  stdio      ``--loop-cmd``: a child process writing ``run.event`` lines on its stdout

Throughput: one run of N deltas per plug per repetition, the plugs taking turns (round-robin),
events/s (every envelope the subscriber receives) from ``start()`` until the subscriber sees the
terminal completion. (1) A fast loop writes many lines at a time: the loops write (other
processes) or give the event loop a turn (in-process) every ``LINES_PER_WRITE`` events. (2) The
same with one event per write (in-process: a turn of the event loop per event).

Latency: a paced run (R events/s, one event per write and flush) whose every event carries its
producer's ``time.time_ns()`` as ``data["t"]`` (the reference loop's model streams it as the
delta's text); latency = the subscriber's receipt − that time. The out-of-process loops sleep
between events; the in-process anchors, which must not block the gateway, pace on the event
loop's timers (~1 ms ticks of a few events). The anchors' latency is the hub's own; what a plug
adds is the difference.

CPU: the gateway's process (``time.process_time``) and the loop's process (``/proc/PID/stat``,
utime + stime) over each run, in µs per event. Targets: HTTP and stdio ≥ 100,000 events/s on one
run (1), p99 latency < 2 ms (3).

Settings are the defaults but ``max_events_per_run`` (raised to fit N) and ``max_runs`` (1:
finished runs are dropped, so memory stays flat), and ``delivery_window_s`` with
``--delivery-window-ms`` (default the gateway's 2 ms; 0 tells the plug's own latency from the
window's); every run is checked to deliver all N deltas
and a terminal ``completed``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import anyio.lowlevel  # noqa: E402
import msgspec  # noqa: E402

from benchmarks._common import (  # noqa: E402
    free_port,
    percentile,
    proc_cpu_s,
    server_process,
    table,
)
from loopgate.contracts.ports import StartRun  # noqa: E402
from loopgate.gateway.app import build_hub  # noqa: E402
from loopgate.gateway.hub import Hub  # noqa: E402
from loopgate.gateway.reference.types import FinishChunk, ModelChunk, ModelRequest, TextChunk  # noqa: E402
from loopgate.gateway.settings import Settings  # noqa: E402

PLUGS = ("reference", "python", "python-thread", "http", "stdio")
OUT_OF_PROCESS = ("http", "stdio")
SCRIPT = str(Path(__file__).resolve())
DELTA = "tok "
# A fast loop's burst: events per write (out of process) or per event-loop turn (in-process).
LINES_PER_WRITE = 256
WARM_UP = 1_000  # deltas of each plug's first, unmeasured run
TARGET_EVENTS_S = 100_000
TARGET_P99_MS = 2.0

_encode = msgspec.json.Encoder().encode


# --- what a run is asked to do: "burst N PER_WRITE" or "paced N RATE" ---------------------------


def script(text: str) -> tuple[bool, int, float]:
    """(paced, events, events per second if paced, else events per write) from a run's input."""
    mode, n, x = text.split()
    return mode == "paced", int(n), float(x)


def burst_input(n: int, per_write: int = LINES_PER_WRITE) -> str:
    return f"burst {n} {per_write}"


def paced_input(n: int, rate: float) -> str:
    return f"paced {n} {rate:g}"


def schedule(n: int, rate: float) -> Iterator[float]:
    """When each event of a paced run is due (perf_counter seconds)."""
    start = time.perf_counter()
    return (start + i / rate for i in range(n))


def done_event() -> dict[str, Any]:
    return {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


# --- the loops ---------------------------------------------------------------------------------


def bursts(n: int, per_write: int) -> Iterator[int]:
    """The sizes of a burst run's writes."""
    return (min(per_write, n - start) for start in range(0, n, per_write))


async def python_loop(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    """The ``--loop`` anchor: N content deltas, a turn of the event loop every burst."""
    paced, n, x = script(ctx.input)
    if paced:
        for due in schedule(n, x):
            wait = due - time.perf_counter()
            if wait > 0:
                await anyio.sleep(wait)
            yield {"kind": "content_delta", "data": {"delta": DELTA, "t": time.time_ns()}}
    else:
        for count in bursts(n, int(x)):
            await anyio.lowlevel.checkpoint()
            for _ in range(count):
                yield {"kind": "content_delta", "data": {"delta": DELTA}}
    yield done_event()


class BenchProvider:
    """A model that streams the run's N text chunks as fast as it can (or paced, each chunk's
    text its send time), for the reference CoreLoop."""

    name = "bench"
    model = "bench"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        prompt = next(m.content for m in reversed(request.messages) if m.role == "user")
        return self._chunks(*script(prompt))

    async def _chunks(self, paced: bool, n: int, x: float) -> AsyncIterator[ModelChunk]:
        if paced:
            for due in schedule(n, x):
                wait = due - time.perf_counter()
                if wait > 0:
                    await anyio.sleep(wait)
                yield TextChunk(str(time.time_ns()))
        else:
            for count in bursts(n, int(x)):
                await anyio.lowlevel.checkpoint()
                for _ in range(count):
                    yield TextChunk(DELTA)
        yield FinishChunk("stop")


def http_app() -> Any:
    """The ``--loop-url`` loop: the run request in, NDJSON events out (another process)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route

    def line(data: dict[str, Any], kind: str = "content_delta") -> bytes:
        return _encode({"kind": kind, "data": data}) + b"\n"

    async def loop(request: Request) -> Response:
        body = msgspec.json.decode(await request.body())
        paced, n, x = script(body["input"])
        lines = paced_lines(n, x) if paced else burst_lines(n, int(x))
        return StreamingResponse(lines, media_type="application/x-ndjson")

    async def burst_lines(n: int, per_write: int) -> AsyncIterator[bytes]:
        for count in bursts(n, per_write):
            yield b"".join(line({"delta": DELTA}) for _ in range(count))
        done = done_event()
        yield line(done["data"], done["kind"])

    async def paced_lines(n: int, rate: float) -> AsyncIterator[bytes]:
        for due in schedule(n, rate):
            wait = due - time.perf_counter()
            if wait > 0:
                # Blocking, as the stdio child sleeps: this process serves this one run, and
                # the event loop's timers would pace in ~1 ms ticks, events bunched in each.
                time.sleep(wait)  # noqa: ASYNC251
            yield line({"delta": DELTA, "t": time.time_ns()})
        done = done_event()
        yield line(done["data"], done["kind"])

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[Route("/loop", loop, methods=["POST"]), Route("/healthz", health)],
    )


def serve_http(port: int) -> None:
    import uvicorn

    uvicorn.run(http_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off")


def stdio_child() -> None:
    """The ``--loop-cmd`` loop: JSON-RPC on stdin/stdout, one run at a time, plain blocking
    writes, each flushed."""
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        message = msgspec.json.decode(raw)
        if message.get("method") != "run.start":
            continue
        out.write(_encode({"jsonrpc": "2.0", "id": message["id"], "result": None}) + b"\n")
        out.flush()
        run_id = message["params"]["run_id"]
        paced, n, x = script(message["params"]["input"])

        def line(data: dict[str, Any], kind: str = "content_delta", run_id: str = run_id) -> bytes:
            params = {"run_id": run_id, "kind": kind, "data": data}
            return _encode({"jsonrpc": "2.0", "method": "run.event", "params": params}) + b"\n"

        if paced:
            for due in schedule(n, x):
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                out.write(line({"delta": DELTA, "t": time.time_ns()}))
                out.flush()
        else:
            for count in bursts(n, int(x)):
                out.write(b"".join(line({"delta": DELTA}) for _ in range(count)))
                out.flush()
        done = done_event()
        out.write(line(done["data"], done["kind"]))
        out.flush()


# --- the gateway side ---------------------------------------------------------------------------


def child_pid(marker: str) -> int:
    """The pid of this process's child whose command line holds ``marker``."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if ppid == me and marker.encode() in cmdline:
            return int(entry.name)
    raise RuntimeError(f"no child process running {marker}")


@dataclass
class RunResult:
    events: int  # envelopes the subscriber received, terminal included
    deltas: int
    seconds: float
    gateway_cpu_s: float
    loop_cpu_s: float
    status: str | None
    latencies_ns: list[int] = field(default_factory=list)


# Bursts of LINES_PER_WRITE events, one event per write, paced (Config.input says what each asks).
SCENARIOS = ("burst", "single", "paced")


@dataclass
class Plug:
    name: str
    hub: Hub
    pid: int | None = None  # the loop's process, when it has its own
    results: dict[str, list[RunResult]] = field(
        default_factory=lambda: {scenario: [] for scenario in SCENARIOS}
    )


def settings_for(plug: str, n: int, http_url: str, window_s: float | None = None) -> Settings:
    """The plug's settings; the defaults but for runs of ``n`` events and a short retention
    (and the delivery window, when given)."""
    limits: dict[str, Any] = {
        "max_events_per_run": max(n, WARM_UP) + 100,
        "max_run_bytes": max(256 << 20, n * 256),
        # Events held in memory (payload + 512 bytes each): a run of n deltas must fit.
        "max_run_retained_bytes": max(64 << 20, n * 1024),
        "max_retained_bytes": max(256 << 20, n * 1024),
        # Finished runs are dropped as the next ones start: memory stays flat.
        "max_runs": 1,
    }
    if window_s is not None:
        limits["delivery_window_s"] = window_s
    if plug in ("python", "python-thread"):
        runner = "thread" if plug == "python-thread" else "event_loop"
        return Settings(loop="benchmarks.loop_plugs:python_loop", loop_runner=runner, **limits)
    if plug == "http":
        return Settings(loop_url=http_url, **limits)
    if plug == "stdio":
        command = shlex.join([sys.executable, SCRIPT, "--stdio-child"])
        return Settings(loop_cmd=command, **limits)
    return Settings(**limits)


async def one_run(plug: Plug, text: str, timed: bool) -> RunResult:
    """Start a run, read it to its end; with ``timed``, each delta's latency from ``data.t``."""
    hub = plug.hub
    # What earlier runs left on the heap stays out of this run's collections.
    gc.collect()
    gc.freeze()
    latencies: list[int] = []
    events = deltas = 0
    last = None
    loop_cpu = proc_cpu_s(plug.pid)
    cpu = time.process_time()
    started = time.perf_counter()
    info = await hub.start(StartRun(input=text))
    async with hub.subscribe(info.id) as sub:
        while not sub.done:
            batch = await sub.next_batch()
            if not batch:
                continue
            now = time.time_ns()
            events += len(batch)
            last = batch[-1]
            for env in batch:
                if env.kind == "content_delta":
                    deltas += 1
                    if timed:
                        sent = env.data.get("t")
                        latencies.append(now - (sent if sent else int(env.data["delta"])))
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    if plug.pid is not None:
        await anyio.sleep(0.02)  # the loop's process finishing its last write
    loop_cpu = proc_cpu_s(plug.pid) - loop_cpu
    status = last.data.get("status") if last is not None and last.kind == "completion" else None
    return RunResult(events, deltas, seconds, cpu, loop_cpu, status, latencies)


def check(plug: Plug, result: RunResult, expected: int) -> None:
    if result.deltas != expected or result.status != "completed":
        raise RuntimeError(
            f"{plug.name}: {result.deltas} of {expected} deltas, terminal status {result.status!r}"
        )


@dataclass
class Config:
    events: int  # deltas per throughput run
    repeat: int  # runs per plug and scenario
    rate: float  # events/s of the paced runs
    paced_events: int  # deltas per paced run
    # The hub's delivery window (Settings.delivery_window_s); 0 delivers at each event, to
    # tell what a plug adds from what the window holds back on purpose.
    delivery_window_s: float = Settings().delivery_window_s

    def input(self, scenario: str) -> tuple[str, int]:
        if scenario == "burst":
            return burst_input(self.events), self.events
        if scenario == "single":
            return burst_input(self.events, 1), self.events
        return paced_input(self.paced_events, self.rate), self.paced_events


async def measure(config: Config, http_url: str, http_pid: int) -> dict[str, Plug]:
    """Every plug's hub in this event loop; the plugs take turns, run by run."""
    async with AsyncExitStack() as stack:
        plugs: dict[str, Plug] = {}
        for name in PLUGS:
            settings = settings_for(
                name, max(config.events, config.paced_events), http_url, config.delivery_window_s
            )
            provider = BenchProvider() if name == "reference" else None
            hub = await stack.enter_async_context(build_hub(settings, provider))
            plugs[name] = Plug(name, hub)
        for plug in plugs.values():  # warm-up: imports, connections, the stdio child
            check(plug, await one_run(plug, burst_input(WARM_UP), False), WARM_UP)
        plugs["stdio"].pid = child_pid("--stdio-child")
        plugs["http"].pid = http_pid
        try:
            for rep in range(config.repeat):
                turn = list(PLUGS[rep % len(PLUGS) :] + PLUGS[: rep % len(PLUGS)])
                for scenario in SCENARIOS:
                    text, expected = config.input(scenario)
                    for name in turn:
                        plug = plugs[name]
                        result = await one_run(plug, text, scenario == "paced")
                        check(plug, result, expected)
                        plug.results[scenario].append(result)
                    turn.reverse()
                print(f"  repetition {rep + 1}/{config.repeat}", file=sys.stderr, flush=True)
        finally:
            gc.unfreeze()
    return plugs


@contextmanager
def http_loop_server() -> Iterator[tuple[str, int]]:
    """The HTTP loop in its own process: its URL and pid."""
    port = free_port()
    argv = [sys.executable, SCRIPT, "--serve-http", str(port)]
    with server_process(argv, port, "/healthz") as proc:
        yield f"http://127.0.0.1:{port}/loop", proc.pid


def run(config: Config) -> dict[str, Plug]:
    with http_loop_server() as (url, pid):
        return anyio.run(measure, config, url, pid)


# --- the report ---------------------------------------------------------------------------------


def rate_of(r: RunResult) -> float:
    return r.events / r.seconds


def us_per_event(cpu_s: float, events: int) -> str:
    return f"{cpu_s / events * 1e6:.2f}"


def cpu_columns(plug: Plug, results: list[RunResult]) -> tuple[str, str, str]:
    events = sum(r.events for r in results)
    gateway = sum(r.gateway_cpu_s for r in results)
    loop = sum(r.loop_cpu_s for r in results)
    if plug.pid is None:
        return us_per_event(gateway, events), "(in gateway)", us_per_event(gateway, events)
    return (
        us_per_event(gateway, events),
        us_per_event(loop, events),
        us_per_event(gateway + loop, events),
    )


def throughput_table(plugs: dict[str, Plug], scenario: str, title: str) -> dict[str, float]:
    fmt = "{:,.0f}".format
    medians = {
        name: statistics.median(rate_of(r) for r in p.results[scenario])
        for name, p in plugs.items()
    }
    rows = []
    for name, plug in plugs.items():
        rates = [rate_of(r) for r in plug.results[scenario]]
        rows.append(
            (
                name,
                fmt(medians[name]),
                f"{fmt(min(rates))} … {fmt(max(rates))}",
                f"{medians[name] / medians['reference']:.2f}×",
                f"{medians[name] / medians['python']:.2f}×",
                *cpu_columns(plug, plug.results[scenario]),
            )
        )
    table(
        title,
        (
            "plug",
            "events/s (median)",
            "range",
            "vs reference",
            "vs python",
            "gateway µs/ev",
            "loop µs/ev",
            "total µs/ev",
        ),
        rows,
    )
    return medians


def latency_table(plugs: dict[str, Plug], title: str) -> dict[str, float]:
    ms = 1e-6
    pooled = {
        name: [x * ms for r in p.results["paced"] for x in r.latencies_ns]
        for name, p in plugs.items()
    }
    p50 = {name: percentile(v, 0.5) for name, v in pooled.items()}
    p99 = {name: percentile(v, 0.99) for name, v in pooled.items()}
    rows = []
    for name, plug in plugs.items():
        per_run = [
            percentile([x * ms for x in r.latencies_ns], 0.99) for r in plug.results["paced"]
        ]
        rows.append(
            (
                name,
                f"{p50[name]:.3f}",
                f"{p99[name]:.3f}",
                f"{max(pooled[name]):.3f}",
                f"{min(per_run):.3f} … {max(per_run):.3f}",
                f"{p50[name] - p50['python']:+.3f}",
                f"{p99[name] - p99['python']:+.3f}",
                *cpu_columns(plug, plug.results["paced"]),
            )
        )
    table(
        title,
        (
            "plug",
            "p50",
            "p99",
            "max",
            "p99 range (runs)",
            "p50 − python",
            "p99 − python",
            "gateway µs/ev",
            "loop µs/ev",
            "total µs/ev",
        ),
        rows,
    )
    return p99


def report(plugs: dict[str, Plug], config: Config) -> dict[str, bool]:
    """Print the tables; whether each out-of-process plug met both targets."""
    runs = f"{config.repeat} runs per plug (round-robin)"
    medians = throughput_table(
        plugs,
        "burst",
        f"(1) throughput: {config.events:,} deltas per run, {LINES_PER_WRITE} per write, "
        f"{runs}; events/s from start() to the terminal event seen by the subscriber",
    )
    throughput_table(
        plugs,
        "single",
        f"(2) throughput, one event per write (in-process: a turn of the event loop per "
        f"event): {config.events:,} deltas per run, {runs}",
    )
    p99 = latency_table(
        plugs,
        f"(3) latency, ms from the producer's send (data.t) to the subscriber: "
        f"{config.paced_events:,} deltas at {config.rate:,.0f} events/s, one per write, {runs}",
    )
    fmt = "{:,.0f}".format
    verdicts = {}
    print()
    for name in OUT_OF_PROCESS:
        fast = medians[name] >= TARGET_EVENTS_S
        quick = p99[name] < TARGET_P99_MS
        verdicts[name] = fast and quick
        print(
            f"{name}: {fmt(medians[name])} events/s on one run (target ≥ "
            f"{fmt(TARGET_EVENTS_S)}: {'met' if fast else 'NOT met'}); p99 latency "
            f"{p99[name]:.2f} ms, {p99[name] - p99['python']:+.2f} ms over the in-process "
            f"anchor (target < {TARGET_P99_MS:g} ms, judged on the whole p99: "
            f"{'met' if quick else 'NOT met'})"
        )
    sys.stdout.flush()
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="deltas per throughput run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per plug, round-robin")
    parser.add_argument("--rate", type=float, default=5_000, help="events/s of the paced runs")
    parser.add_argument("--paced-events", type=int, default=10_000, help="deltas per paced run")
    parser.add_argument(
        "--delivery-window-ms",
        type=float,
        default=Settings().delivery_window_s * 1000,
        help="the hubs' delivery window (default: the gateway's, 2 ms; 0: at each event)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--serve-http", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--stdio-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_http is not None:
        serve_http(args.serve_http)
        return 0
    if args.stdio_child:
        stdio_child()
        return 0
    if args.quick:
        args.events, args.repeat, args.paced_events = 20_000, 2, 2_000
    config = Config(
        args.events, args.repeat, args.rate, args.paced_events, args.delivery_window_ms / 1000
    )
    print(
        f"python {sys.version.split()[0]}; {config.events:,} deltas × {config.repeat} per plug; "
        f"paced {config.paced_events:,} at {config.rate:,.0f}/s; delivery window "
        f"{config.delivery_window_s * 1000:g} ms",
        flush=True,
    )
    report(run(config), config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
