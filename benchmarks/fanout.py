"""Fan-out: the hub in-process; native SSE over loopback against two anchors; live latency; memory.

    .venv/bin/python -m benchmarks.fanout [--quick] [--rounds 3] [--latency-runs 3]

(a) The hub in-process: one ingest run published as fast as it goes to 1…1,000 in-process
    subscribers, each of which reads every envelope it is handed (checks its ``seq``), so
    "events read/s" counts events subscribers looked at — not list slices handed over.
(b) A finished run of N small envelopes, read over real sockets on 127.0.0.1 by 1 and 100
    clients (raw asyncio HTTP/1.1 in this process, chunked decoding, every frame counted) from:
      loopgate       ``loopgate serve``, ``GET /v1/runs/{id}/events``
      batched        anchor: a Starlette ``StreamingResponse`` that writes the same envelopes
                     (msgspec Structs, encoded by msgspec) in batches of ``max_batch`` (512)
                     frames per write, framed as loopgate frames them — what loopgate does
                     without the hub
      sse-starlette  anchor: ``EventSourceResponse``, one event per write, ``json.dumps``
    Both anchors in one uvicorn process, on loopgate's uvicorn stack (h11 on asyncio). Rounds
    are interleaved (the
    order rotates each round); each cell reports the median and range of events/s received.
(c) Live latency: an ingest run fed at 1,000 events/s (10 events every 10 ms, from a separate
    pusher process), read by 1 and 100 SSE clients; latency = receipt − the envelope's ``ts``
    (the gateway's acceptance time). Repeated ``--latency-runs`` times; each run's p50/p99.
(d) Resident memory per idle SSE subscriber.

Every measurement is printed when it ends; one that fails or times out is recorded as failed
and the rest goes on. Targets (issue #15): loopgate ≥ 1.5× the batched anchor at 1 and 100
clients; p99 acceptance → receipt < 20 ms at 100 clients, in 3 of 3 runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import httpx  # noqa: E402

from benchmarks._common import (  # noqa: E402
    STACK,
    STACK_UVICORN,
    fmt_range,
    free_port,
    median_range,
    percentile,
    rss_kib,
    say,
    serve_argv,
    server_processes,
    table,
)

SERVERS = ("loopgate", "batched", "sse-starlette")
ANCHORS = SERVERS[1:]
DELTA = {"delta": "a few words "}
DONE = {"status": "completed"}
ROUND_TIMEOUT_S = 180.0


# --- (a) the hub in-process -------------------------------------------------------------------


async def hub_fanout(subscribers: int, events: int) -> tuple[float, float]:
    """(events/s published, events/s read summed over subscribers)."""
    from loopgate.contracts.ports import StartRun
    from loopgate.gateway.app import build_hub
    from loopgate.gateway.settings import Settings

    settings = Settings(
        max_events_per_run=events + 10,
        subscriber_max_lag=events + 10,
        max_subscribers_per_run=subscribers,
        max_batch=4096,
    )
    async with build_hub(settings) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        run = hub.run(run_id)
        read = [0] * subscribers

        async def consume(i: int) -> None:
            # Read every envelope handed over: a batch is a list slice, and counting its
            # length would count a handoff, not a delivery.
            seen = 0
            async with hub.subscribe(run_id) as sub:
                while not sub.done:
                    for envelope in await sub.next_batch():
                        seen += 1
                        if envelope.seq != seen:
                            raise AssertionError(f"seq {envelope.seq} after {seen - 1}")
            read[i] = seen

        async with anyio.create_task_group() as tg:
            for i in range(subscribers):
                tg.start_soon(consume, i)
            await anyio.sleep(0.05)
            started = time.perf_counter()
            publish = hub.publish
            for n in range(events - 1):
                publish(run, "content_delta", DELTA)
                if not n % 1024:
                    await anyio.lowlevel.checkpoint()  # let subscribers keep up
            publish(run, "completion", DONE)
        elapsed = time.perf_counter() - started
        assert read == [events] * subscribers, read[:3]
    return events / elapsed, sum(read) / elapsed


def part_a(rounds: int, events: int) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for subs in (1, 10, 100, 1000):
        n = events if subs <= 10 else events // 10
        published: list[float] = []
        read: list[float] = []
        for _ in range(rounds):
            p, r = anyio.run(hub_fanout, subs, n)
            published.append(p)
            read.append(r)
        say(f"  (a) {subs:>4} subscribers: {fmt_range(published)} events/s published")
        rows.append((subs, n, fmt_range(published), fmt_range(read)))
    return rows


# --- an SSE client on raw sockets ---------------------------------------------------------------


async def read_sse(
    port: int,
    path: str,
    on_frames: Callable[[list[bytes], int], None] | None = None,
    opened: Callable[[], None] | None = None,
) -> int:
    """GET ``path`` and read the event stream to its end; the number of frames.

    Raw asyncio, not httpx: the client shares two cores with the server, and what it costs per
    chunk is time the server does not get. ``on_frames`` gets the complete frames of each read
    and the receipt time (ns).
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    try:
        writer.write(
            b"GET %b HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n"
            % path.encode()
        )
        status = await reader.readline()
        if not status.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"GET {path}: {status.decode().strip()}")
        chunked = False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"transfer-encoding":
                chunked = value.strip().lower() == b"chunked"
        if not chunked:
            raise RuntimeError(f"GET {path}: not a chunked stream")
        if opened is not None:
            opened()
        count = 0
        last = b""
        buffer = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                break
            data = (await reader.readexactly(size + 2))[:-2]
            if on_frames is None:
                # A frame ends with a blank line; one may straddle two reads.
                count += data.count(b"\n\n") + (last == b"\n" and data[:1] == b"\n")
                last = data[-1:]
            else:
                now = time.time_ns()
                *frames, buffer = (buffer + data).split(b"\n\n")
                count += len(frames)
                on_frames(frames, now)
        return count
    finally:
        writer.close()


async def read_many(
    port: int,
    path: str,
    clients: int,
    on_frames: Callable[[list[bytes], int], None] | None = None,
    opened: Callable[[], None] | None = None,
) -> list[int]:
    readers = (read_sse(port, path, on_frames, opened) for _ in range(clients))
    return list(await asyncio.gather(*readers))


# --- (b) a finished run over real sockets -----------------------------------------------------


ANCHOR_APP = """
import json, sys
import msgspec
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route


class Envelope(msgspec.Struct):
    run_id: str
    seq: int
    ts: int
    kind: str
    data: dict


encode = msgspec.json.Encoder().encode
MAX_BATCH = 512  # loopgate's default max_batch: frames per write
loaded = []


def chosen(request):
    # Read on first use: the file is written once loopgate has served the run, after both
    # servers started side by side.
    if not loaded:
        loaded.append(msgspec.json.Decoder(list[Envelope]).decode(open(sys.argv[1], "rb").read()))
    envelopes = loaded[0]
    n = int(request.query_params.get("n", len(envelopes)))
    return envelopes[: n - 1] + envelopes[-1:]


async def batched(request):
    # The fair anchor: loopgate's framing and batching, with no hub behind it.
    events = chosen(request)

    async def body():
        for i in range(0, len(events), MAX_BATCH):
            yield b"".join(
                b"id: %d\\ndata: %b\\n\\n" % (e.seq, encode(e))
                for e in events[i : i + MAX_BATCH]
            )

    return StreamingResponse(body(), media_type="text/event-stream; charset=utf-8")


async def sse_starlette(request):
    events = chosen(request)

    async def gen():
        for e in events:
            data = json.dumps(msgspec.to_builtins(e), separators=(",", ":"))
            yield {"id": str(e.seq), "data": data}  # unnamed, as loopgate's

    # LF separators, as an AG-UI/EventSource client needs; CRLF is sse-starlette's default.
    return EventSourceResponse(gen(), sep="\\n", ping=15)


async def health(request):
    return PlainTextResponse("ok")


app = Starlette(
    routes=[
        Route("/batched", batched),
        Route("/sse-starlette", sse_starlette),
        Route("/healthz", health),
    ]
)
"""


@dataclass
class Throughput:
    """events/s received per server and client count, one entry per round."""

    results: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    failures: dict[tuple[str, int], list[str]] = field(default_factory=dict)

    def add(self, server: str, clients: int, value: float | str) -> None:
        if isinstance(value, str):
            self.failures.setdefault((server, clients), []).append(value)
        else:
            self.results.setdefault((server, clients), []).append(value)

    def median(self, server: str, clients: int) -> float | None:
        values = self.results.get((server, clients))
        return median_range(values)[0] if values else None


def finished_stream(port: int, path: str, clients: int, events: int) -> float | str:
    """events/s received by ``clients`` readers of a finished stream, or why it failed
    (``events`` < 0: any number is fine, a warm-up)."""

    async def go() -> list[int]:
        async with asyncio.timeout(ROUND_TIMEOUT_S):
            return await read_many(port, path, clients)

    started = time.perf_counter()
    try:
        counts = asyncio.run(go())
    except TimeoutError:
        return f"timed out after {ROUND_TIMEOUT_S:.0f} s"
    except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as exc:
        return f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    if events >= 0 and any(c != events for c in counts):
        return f"received {min(counts)}…{max(counts)} of {events} events"
    return events * clients / elapsed


def part_b(
    lg_port: int, lg_paths: dict[int, str], anchor_port: int, sizes: dict[int, int], rounds: int
) -> Throughput:
    result = Throughput()
    for clients in (1, 100):
        for n in range(rounds):
            # Rotate who goes first: drift in the machine's load falls on every server alike.
            order = SERVERS[n % 3 :] + SERVERS[: n % 3]
            for server in order:
                if server == "loopgate":
                    port, path = lg_port, lg_paths[clients]
                else:
                    port, path = anchor_port, f"/{server}?n={sizes[clients]}"
                value = finished_stream(port, path, clients, sizes[clients])
                result.add(server, clients, value)
                shown = f"{value:,.0f} events/s" if isinstance(value, float) else f"FAILED: {value}"
                say(f"  (b) {clients:>3} clients, round {n + 1}, {server:<13} {shown}")
    return result


# --- (c) live latency -------------------------------------------------------------------------


def push_lines(n: int, end: bool) -> bytes:
    line = json.dumps({"kind": "content_delta", "data": DELTA}) + "\n"
    tail = json.dumps({"kind": "completion", "data": DONE}) + "\n" if end else ""
    return (line * n + tail).encode()


def pusher(base: str, run_id: str, events: int, rate: int) -> None:
    """Feed ``events`` at ``rate`` per second in 10 ms ticks, then end the run.

    On a schedule, not sleep-after-post (which falls behind by each request's time); a tick
    that comes late sends every event owed so far, so the rate holds on average even when a
    busy machine slows the posts down.
    """
    per_tick = max(1, rate // 100)
    sent = 0
    with httpx.Client(timeout=60) as client:
        started = time.perf_counter()
        tick = 0
        while sent < events:
            delay = started + tick * 0.01 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                tick = max(tick, int((time.perf_counter() - started) / 0.01))
            n = min(events, (tick + 1) * per_tick) - sent
            client.post(f"{base}/v1/runs/{run_id}/events", content=push_lines(n, False))
            sent += n
            tick += 1
        client.post(f"{base}/v1/runs/{run_id}/events", content=push_lines(0, True))


def live_latency(base: str, port: int, clients: int, events: int, rate: int) -> dict[str, Any]:
    run_id = start_run(base)
    latencies: list[float] = []

    def on_frames(frames: list[bytes], now: int) -> None:
        # A byte search, not json.loads: the client must not be what is measured.
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

        readers = asyncio.ensure_future(
            read_many(port, f"/v1/runs/{run_id}/events", clients, on_frames, opened)
        )
        async with asyncio.timeout(30):
            await all_in.wait()  # every reader subscribed before the first event
        feed = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.fanout",
            "--pusher",
            json.dumps([base, run_id, events, rate]),
            cwd=ROOT,
        )
        cpu0, t0 = time.process_time(), time.perf_counter()
        try:
            async with asyncio.timeout(ROUND_TIMEOUT_S):
                await feed.wait()
                took["feed"] = time.perf_counter() - t0
                await readers
        finally:
            if feed.returncode is None:
                feed.kill()
                await feed.wait()
            readers.cancel()
        took["client_cpu"] = time.process_time() - cpu0

    took: dict[str, float] = {}
    asyncio.run(go())
    return {
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies),
        "received": len(latencies),
        # The pusher keeps a schedule but a busy machine can still slow it: the rate it got.
        "rate": events / took["feed"],
        "client_cpu": took["client_cpu"] / took["feed"],
    }


def part_c(base: str, port: int, runs: int, events: int) -> dict[int, list[dict[str, Any] | str]]:
    out: dict[int, list[dict[str, Any] | str]] = {1: [], 100: []}
    for n in range(runs):
        for clients in (1, 100):
            try:
                r: dict[str, Any] | str = live_latency(base, port, clients, events, 1000)
            except Exception as exc:  # a failed run is reported; the next one still runs
                r = f"{type(exc).__name__}: {exc}"
            out[clients].append(r)
            if isinstance(r, str):
                say(f"  (c) run {n + 1}, {clients:>3} clients: FAILED {r}")
            else:
                say(
                    f"  (c) run {n + 1}, {clients:>3} clients: p50 {r['p50']:.2f} ms, "
                    f"p99 {r['p99']:.2f} ms, max {r['max']:.1f} ms ({r['rate']:,.0f} events/s "
                    f"pushed, {r['received']:,} events "
                    f"received; client process {r['client_cpu'] * 100:.0f} % of a core)"
                )
    return out


# --- (d) memory --------------------------------------------------------------------------------


def part_d(base: str, port: int, pid: int, idle: int, settle_s: float) -> tuple[int, int]:
    """RSS growth (KiB) of the server holding ``idle`` open SSE subscribers."""
    idle_run = start_run(base)
    before = rss_kib(pid)

    async def hold() -> int:
        conns = []
        for _ in range(idle):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"GET /v1/runs/%b/events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" % idle_run.encode()
            )
            conns.append((reader, writer))
        for reader, _ in conns:
            await reader.readline()  # the status line: the subscription is open
        await asyncio.sleep(settle_s)
        after = rss_kib(pid)
        for _, writer in conns:
            writer.close()
        return after

    after = asyncio.run(hold())
    httpx.post(f"{base}/v1/runs/{idle_run}/events", content=push_lines(0, True))
    return before, after


# --- the whole benchmark ------------------------------------------------------------------------


def start_run(base: str) -> str:
    return str(httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).json()["id"])


def finished_run(base: str, events: int) -> tuple[str, list[dict[str, Any]]]:
    """An ingested run of ``events`` (the last a completion) and its envelopes as served."""
    run_id = start_run(base)
    httpx.post(f"{base}/v1/runs/{run_id}/events", content=push_lines(events - 1, True), timeout=120)
    envelopes = []
    with httpx.stream("GET", f"{base}/v1/runs/{run_id}/events", timeout=120) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                envelopes.append(json.loads(line[6:]))
    assert len(envelopes) == events, len(envelopes)
    return run_id, envelopes


def gateway_argv(port: int) -> list[str]:
    return serve_argv(
        port,
        "--max-subscribers-per-run",
        "2000",
        # 1,000 idle subscribers and the requests beside them: past the default cap of 1,000.
        "--max-connections",
        "4000",
        "--max-body-bytes",
        str(64 << 20),
    )


@dataclass
class Report:
    a: list[tuple[object, ...]] = field(default_factory=list)
    b: Throughput | None = None
    sizes: dict[int, int] = field(default_factory=dict)
    c: dict[int, list[dict[str, Any] | str]] = field(default_factory=dict)
    d: tuple[int, int, int] | None = None  # subscribers, RSS before, after (KiB)
    failed: list[str] = field(default_factory=list)


@dataclass
class Sizes:
    """How much each part does; ``quick()`` is a smoke run, ``tiny()`` the test suite's."""

    hub_events: int = 100_000  # (a), to 1 and 10 subscribers (a tenth to 100 and 1,000)
    stream_events: int = 50_000  # (b), to 1 client (a tenth to each of 100)
    latency_events: int = 5_000  # (c), at 1,000 events/s
    idle: int = 1_000  # (d)
    settle_s: float = 1.0  # (d): time the idle subscribers are held before RSS is read
    rounds: int = 3  # (a), (b)
    latency_runs: int = 3  # (c)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(hub_events=20_000, stream_events=10_000, latency_events=2_000, idle=200)

    @classmethod
    def tiny(cls) -> Sizes:
        return cls(
            hub_events=2_000,
            stream_events=1_000,
            latency_events=200,
            idle=20,
            settle_s=0.2,
            rounds=1,
            latency_runs=1,
        )


def run(sizes: Sizes, report: Report) -> None:
    say(f"python {sys.version.split()[0]}; uvicorn stack {STACK}; {sizes.rounds} rounds")
    say("(a) hub fan-out in-process")
    report.a = part_a(sizes.rounds, sizes.hub_events)

    # Every client reads the whole finished run; 100 clients read a tenth each, so the
    # sse-starlette anchor still finishes well inside the timeout.
    report.sizes = per_client = {1: sizes.stream_events, 100: sizes.stream_events // 10}
    port, anchor_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="loopgate-fanout-")))
        (tmp / "fanout_anchors.py").write_text(ANCHOR_APP)
        anchor_cmd = [
            sys.executable,
            "-c",
            f"import sys; sys.argv=['x', {str(tmp / 'envelopes.json')!r}]; "
            f"sys.path.insert(0, {str(tmp)!r}); import uvicorn, fanout_anchors as m; "
            f"uvicorn.run(m.app, host='127.0.0.1', port={anchor_port}, "
            f"log_level='warning', proxy_headers=False, **{STACK_UVICORN!r})",
        ]
        gateway, _ = stack.enter_context(
            server_processes(
                [
                    (gateway_argv(port), port, "/healthz"),
                    (anchor_cmd, anchor_port, "/healthz"),
                ],
            )
        )
        runs = {c: finished_run(base, per_client[c]) for c in (1, 100)}
        lg_paths = {c: f"/v1/runs/{runs[c][0]}/events" for c in (1, 100)}
        # The anchors serve the very envelopes loopgate serves (same run id, ts, payloads).
        (tmp / "envelopes.json").write_text(json.dumps(runs[1][1]))
        # One unrecorded read from each: the anchors load the envelopes on first use, and
        # every server's first response pays for code and caches the later ones reuse.
        for server in SERVERS:
            path = lg_paths[100] if server == "loopgate" else f"/{server}?n=100"
            finished_stream(port if server == "loopgate" else anchor_port, path, 1, -1)
        say(
            f"\n(b) a finished run over SSE, {per_client[1]:,} events to 1 client, "
            f"{per_client[100]:,} to each of 100"
        )
        report.b = part_b(port, lg_paths, anchor_port, per_client, sizes.rounds)

        say("\n(c) live latency, acceptance → receipt, 1,000 events/s pushed")
        report.c = part_c(base, port, sizes.latency_runs, sizes.latency_events)

        before, after = part_d(base, port, gateway.pid, sizes.idle, sizes.settle_s)
        report.d = (sizes.idle, before, after)
        say(f"\n(d) {sizes.idle} idle subscribers: RSS +{after - before:,} KiB")


def print_report(report: Report) -> dict[str, bool | None]:
    verdicts: dict[str, bool | None] = {}
    if report.a:
        table(
            "(a) hub fan-out in-process, median (range) over rounds",
            ("subscribers", "events", "events/s published", "events read/s (all subscribers)"),
            report.a,
        )
    b = report.b
    if b is not None:
        rows = []
        for clients in (1, 100):
            lg = b.median("loopgate", clients)
            row: list[object] = [clients]
            for server in SERVERS:
                values = b.results.get((server, clients), [])
                failed = len(b.failures.get((server, clients), []))
                row.append(fmt_range(values) + (f" [{failed} failed]" if failed else ""))
            for anchor in ANCHORS:
                theirs = b.median(anchor, clients)
                ratio = lg / theirs if lg is not None and theirs else None
                row.append("—" if ratio is None else f"{ratio:.2f}x")
                if anchor == "batched":
                    verdicts[f"native SSE >= 1.5x batched, {clients} clients"] = (
                        None if ratio is None else ratio >= 1.5
                    )
            rows.append(row)
        table(
            "(b) SSE over loopback, a finished run, events/s received: median (range)",
            ("clients", *SERVERS, "loopgate / batched", "loopgate / sse-starlette"),
            rows,
        )
    if report.c:
        rows = []
        for clients, results in report.c.items():
            for n, r in enumerate(results, 1):
                if isinstance(r, str):
                    rows.append((clients, n, "failed", r, "", ""))
                else:
                    rows.append(
                        (
                            clients,
                            n,
                            f"{r['p50']:.2f}",
                            f"{r['p99']:.2f}",
                            f"{r['max']:.1f}",
                            f"{r['rate']:,.0f}",
                        )
                    )
        table(
            "(c) live latency, acceptance → receipt, ms",
            ("clients", "run", "p50", "p99", "max", "events/s pushed"),
            rows,
        )
        hundred = report.c.get(100, [])
        good = sum(1 for r in hundred if not isinstance(r, str) and r["p99"] < 20)
        verdicts[f"p99 < 20 ms at 100 clients ({good} of {len(hundred)} runs)"] = (
            None if not hundred else good == len(hundred) and len(hundred) >= 3
        )
    if report.d is not None:
        idle, before, after = report.d
        table(
            "(d) memory per idle SSE subscriber",
            ("subscribers", "RSS growth KiB", "KiB each"),
            [(idle, after - before, f"{(after - before) / idle:.1f}")],
        )
    for what in report.failed:
        say(f"FAILED: {what}")
    if verdicts:
        table(
            "targets",
            ("target", "verdict"),
            [(k, {True: "met", False: "MISSED", None: "no data"}[v]) for k, v in verdicts.items()],
        )
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds for (a), (b) (default 3)")
    parser.add_argument("--latency-runs", type=int, help="repetitions of (c) (default 3)")
    parser.add_argument("--pusher", help=argparse.SUPPRESS)  # internal: (c)'s feeding process
    args = parser.parse_args(argv)
    if args.pusher:
        pusher(*json.loads(args.pusher))
        return 0
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.rounds:
        sizes.rounds = args.rounds
    if args.latency_runs:
        sizes.latency_runs = args.latency_runs
    report = Report()
    try:
        run(sizes, report)
    except Exception as exc:
        # A server that would not start, a run that could not be made: keep the rest.
        report.failed.append(f"{type(exc).__name__}: {exc}")
    finally:
        print_report(report)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
