"""The load side of the SSE benchmarks (agui_e2e, gateway_overhead): N clients in a closed
loop, each POSTing a run and reading its SSE stream to the end on raw asyncio sockets
(keep-alive, HTTP/1.1 chunked decoding; the SSE parsed only enough to time the first and last
event and count frames), in a process of its own so that its CPU is never the server's.

    python -m benchmarks._sse_load CONFIG_JSON    # one round; prints its result as JSON

CONFIG: port, server_pid, clients, seconds, warm, label, min_runs, and the route: path, body
(the request's JSON, ``RUN_ID`` replaced by a fresh id per run) and terminal (what the last
frame of a whole run holds).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import median_range, percentile, tree_cpu_s

ROOT = Path(__file__).resolve().parents[1]
REQUEST_TIMEOUT_S = 60.0
WINDOW_CAP_S = 60.0  # a round's window never runs longer, however slow the server


@dataclass
class Case:
    """One case of a side-by-side benchmark: every round's result per side (``sides[0]``:
    loopgate, ``sides[1]``: its anchor), and the failures."""

    sides: tuple[str, ...]
    rounds: dict[str, list[dict[str, Any]]] = field(init=False)
    failures: dict[str, list[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.rounds = {side: [] for side in self.sides}
        self.failures = {side: [] for side in self.sides}

    def values(self, side: str, metric: str) -> list[float]:
        return [r[metric] for r in self.rounds[side] if r.get(metric) is not None]

    def median(self, side: str, metric: str) -> float | None:
        values = self.values(side, metric)
        return median_range(values)[0] if values else None

    def ratio(self, metric: str) -> float | None:
        """Loopgate's median over the anchor's."""
        ours, theirs = self.median(self.sides[0], metric), self.median(self.sides[1], metric)
        return ours / theirs if ours is not None and theirs else None


@dataclass(frozen=True)
class Route:
    """Where the runs go (``body``: the request's JSON, ``RUN_ID`` replaced by a fresh id per
    run) and what the last frame of a whole run holds (``terminal``)."""

    path: str
    body_json: str
    terminal_text: str

    def head(self, port: int) -> bytes:
        return (
            f"POST {self.path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            "content-type: application/json\r\naccept: text/event-stream\r\n"
            "content-length: %d\r\n\r\n"
        ).encode()

    def body(self, run_id: str) -> bytes:
        return self.body_json.replace("RUN_ID", run_id).encode()

    @property
    def terminal(self) -> bytes:
        return self.terminal_text.encode()


def load_round(
    route: Route,
    port: int,
    server_pid: int,
    clients: int,
    seconds: float,
    label: str,
    timeout_s: float,
    min_runs: int = 20,
) -> dict[str, Any]:
    """One load round in a fresh client process; a hung round is killed and reported."""
    config = {
        "port": port,
        "server_pid": server_pid,
        "clients": clients,
        "seconds": seconds,
        "warm": min(1.0, seconds * 0.25),
        "label": label,
        "min_runs": min_runs,
        "path": route.path,
        "body": route.body_json,
        "terminal": route.terminal_text,
    }
    try:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks._sse_load", json.dumps(config)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"client timed out after {timeout_s:.0f} s"}
    if out.returncode != 0:
        return {"failed": (out.stderr.strip().splitlines() or ["?"])[-1]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@dataclass
class Done:
    """One run as the client saw it."""

    finished_at: float
    ttfb_ms: float
    ttlb_ms: float
    frames: int
    ok: bool


class Meter:
    """What every client of one round adds to: frames received so far, runs finished."""

    def __init__(self) -> None:
        self.frames = 0
        self.done: list[Done] = []


async def one_run(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    route: Route,
    head: bytes,
    body: bytes,
    meter: Meter,
) -> tuple[Done, bool]:
    """POST one run and read its SSE to the end; (the result, whether the connection stays)."""
    clock = time.perf_counter
    writer.write(head % len(body) + body)
    sent = clock()
    status = await reader.readline()
    keep = True
    chunked = False
    length = -1
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"transfer-encoding":
            chunked = value == b"chunked"
        elif name == b"content-length":
            length = int(value)
        elif name == b"connection" and value == b"close":
            keep = False
    first = last = 0.0
    frames = 0
    end = b""  # the last byte read: a frame's blank line may straddle two reads
    tail = b""

    def take(data: bytes) -> None:
        nonlocal first, last, frames, end, tail
        now = clock()
        if not first and b"data:" in data:
            first = now
        n = data.count(b"\n\n") + (end == b"\n" and data[:1] == b"\n")
        frames += n
        meter.frames += n
        end = data[-1:]
        tail = (tail + data)[-200:]
        last = now

    if chunked:
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                await reader.readline()  # the blank line after the last chunk
                break
            take(await reader.readexactly(size))
            await reader.readexactly(2)
    elif length >= 0:
        take(await reader.readexactly(length))
    else:  # a body that ends when the connection does
        while data := await reader.read(65536):
            take(data)
        keep = False
    ok = status.startswith(b"HTTP/1.1 200") and route.terminal in tail
    done = Done(
        finished_at=clock(),
        ttfb_ms=(first - sent) * 1e3 if first else float("nan"),
        ttlb_ms=(last - sent) * 1e3 if last else float("nan"),
        frames=frames,
        ok=ok,
    )
    return done, keep


async def until(condition: Callable[[], bool]) -> None:
    """Poll: the conditions span clocks and counters that no single event signals."""
    while True:
        if condition():
            return
        await asyncio.sleep(0.01)


async def load(config: dict[str, Any]) -> dict[str, Any]:
    """N clients in a closed loop; one measured window once all of them are under way.

    Work in the window is counted in frames received, divided by the frames of one run: the
    clients' runs finish in waves (a server that shares its core fairly finishes 50 runs
    together), and counting whole runs would make the figure depend on where a wave falls.
    """
    port, clients, seconds, warm = (
        config["port"],
        config["clients"],
        config["seconds"],
        config["warm"],
    )
    server_pid, label = config["server_pid"], config["label"]
    route = Route(config["path"], config["body"], config["terminal"])
    head = route.head(port)
    meter = Meter()
    errors: list[str] = []
    started = [False] * clients
    marks: dict[str, float] = {}
    stop = asyncio.Event()

    async def client(i: int) -> None:
        n = 0
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        try:
            while not stop.is_set():
                n += 1
                try:
                    if writer is None:
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    assert reader is not None
                    async with asyncio.timeout(REQUEST_TIMEOUT_S):
                        result, keep = await one_run(
                            reader, writer, route, head, route.body(f"{label}-{i}-{n}"), meter
                        )
                except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError) as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    if writer is not None:
                        writer.close()
                    writer = None
                    await asyncio.sleep(0.05)  # a server that is gone is not hammered
                    continue
                meter.done.append(result)
                started[i] = True
                if not result.ok:
                    errors.append(f"a run ended without its last frame ({result.frames} frames)")
                if not keep:
                    writer.close()
                    writer = None
        finally:
            if writer is not None:
                writer.close()

    def mark(name: str) -> None:
        marks[f"t{name}"] = time.perf_counter()
        marks[f"cpu{name}"] = tree_cpu_s(server_pid)
        marks[f"me{name}"] = time.process_time()
        marks[f"frames{name}"] = meter.frames
        marks[f"runs{name}"] = len(meter.done)

    async def window() -> None:
        # Start once every client finished a run (each one is past its start-up) and the
        # warm-up passed; end once the window is ``seconds`` long and holds enough finished
        # runs for the percentiles (two per client, at least 20) — or at the cap.
        begin = time.perf_counter()
        await until(
            lambda: (
                (all(started) and time.perf_counter() - begin >= warm)
                or time.perf_counter() - begin >= WINDOW_CAP_S
            )
        )
        mark("0")
        need = max(2 * clients, config["min_runs"])
        await until(
            lambda: (
                (
                    time.perf_counter() - marks["t0"] >= seconds
                    and len(meter.done) - marks["runs0"] >= need
                )
                or time.perf_counter() - marks["t0"] >= WINDOW_CAP_S
            )
        )
        mark("1")
        stop.set()

    tasks = [asyncio.ensure_future(client(i)) for i in range(clients)]
    await window()
    # Runs still streaming are cut off: the window is closed, and waiting for a slow side's
    # last wave would only delay the next round.
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    wall = marks["t1"] - marks["t0"]
    in_window = [d for d in meter.done if marks["t0"] < d.finished_at <= marks["t1"] and d.ok]
    per_run = sorted(d.frames for d in meter.done if d.ok)
    frames_per_run = per_run[len(per_run) // 2] if per_run else 0
    runs = (marks["frames1"] - marks["frames0"]) / frames_per_run if frames_per_run else 0.0
    ttfb = [d.ttfb_ms for d in in_window]
    ttlb = [d.ttlb_ms for d in in_window]
    cpu = marks["cpu1"] - marks["cpu0"]
    return {
        "runs": runs,
        "finished": len(in_window),
        "window_s": wall,
        "runs_per_s": runs / wall,
        "cpu_ms_per_run": cpu / runs * 1e3 if runs else None,
        "server_cpu_pct": cpu / wall * 100,
        "client_cpu_pct": (marks["me1"] - marks["me0"]) / wall * 100,
        "ttfb_p50": percentile(ttfb, 0.5) if ttfb else None,
        "ttfb_p99": percentile(ttfb, 0.99) if ttfb else None,
        "ttlb_p50": percentile(ttlb, 0.5) if ttlb else None,
        "ttlb_p99": percentile(ttlb, 0.99) if ttlb else None,
        "frames": frames_per_run,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(load(json.loads(sys.argv[1])))))
