"""Helpers shared by the benchmarks: timing, tables, a server subprocess, RSS."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from loopgate.contracts.envelope import Envelope
    from loopgate.contracts.projector import ProjectorContext

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server_process(
    argv: Sequence[str], port: int, health: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    with server_processes([(argv, port, health)], env) as (proc,):
        yield proc


def serve_argv(port: int, *extra: str) -> list[str]:
    """``loopgate serve`` on ``port`` as a benchmark runs it: quiet log, ``extra`` flags."""
    return [
        sys.executable, "-m", "loopgate", "serve",
        "--port", str(port), "--log-level", "warning", *extra,
    ]  # fmt: skip


@contextmanager
def server_processes(
    servers: Sequence[tuple[Sequence[str], int, str]], env: Mapping[str, str] | None = None
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start every server at once (their imports overlap), wait until each answers ``health``,
    and stop them all at the end (SIGINT, then kill). ``env`` is added to every server's."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for argv, _, _ in servers:
            procs.append(
                subprocess.Popen(
                    list(argv),
                    cwd=REPO,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
                )
            )
        deadline = time.monotonic() + 30
        for proc, (argv, port, health) in zip(procs, servers, strict=True):
            while True:
                try:
                    url = f"http://127.0.0.1:{port}{health}"
                    if httpx.get(url, timeout=1).status_code < 500:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"server {list(argv)} did not start")
                time.sleep(0.05)
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class ProcStats:
    """What /proc says of one process: memory (now and its peak) and CPU time."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def status_mib(self, key: str) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no {key} for process {self.pid}")

    def rss(self) -> float:
        return self.status_mib("VmRSS")

    def reset_peak(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def peak(self) -> float:
        return self.status_mib("VmHWM")

    def cpu_s(self) -> float:
        return proc_cpu_s(self.pid)


def proc_cpu_s(pid: int | None) -> float:
    """utime + stime of a process (all its threads), in seconds; 0 for none."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# loopgate's uvicorn stack (gateway/server.py: h11 on asyncio's loop; httptools measured no
# faster, uvloop failed a flood test), pinned for every anchor too: the same on both sides.
STACK = "h11/asyncio"
STACK_UVICORN = {"http": "h11", "loop": "asyncio"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process, every live process under it, and the children it reaped.

    A server is charged for all the work done on its behalf: a helper it spawned counts while it
    lives (``/proc/PID/task/*/children``) and after it was reaped (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended while we looked
            continue
        for child in children:
            try:
                total += tree_cpu_s(int(child))
            except OSError:  # the child ended (its time moves to our cutime)
                continue
    return total


def median_range(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, lowest, highest): what a run of repeated rounds reports, never the best one."""
    ordered = sorted(values)
    n = len(ordered)
    mid = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return mid, ordered[0], ordered[-1]


def fmt_range(values: Sequence[float], spec: str = ",.0f") -> str:
    """``median (low … high)`` of repeated rounds, or ``—`` for none."""
    if not values:
        return "—"
    mid, lo, hi = median_range(values)
    return f"{mid:{spec}} ({lo:{spec}} … {hi:{spec}})"


def say(*parts: object) -> None:
    """Print a partial result now: a long benchmark that dies later keeps what it measured."""
    print(*parts, flush=True)


class RawHttp:
    """One keep-alive HTTP/1.1 connection on raw asyncio streams, for load that must cost its
    sender next to nothing: httpx spends more CPU per request than the server it measures
    (tens of µs, and more per request the more connections its pool holds), and here the
    client shares the two cores with the servers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawHttp:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._writer is not None:
            self._writer.close()

    @staticmethod
    def post_bytes(path: str, body: bytes, content_type: str = "application/x-ndjson") -> bytes:
        """A whole POST request, built once and sent as often as wanted."""
        head = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send a request built by ``post_bytes``; (status, body) of its answer."""
        assert self._reader is not None and self._writer is not None
        self._writer.write(request)
        status = int((await self._reader.readline()).split(b" ", 2)[1])
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self._reader.readexactly(length)


def interleaved_rounds(
    paths: dict[str, Callable[[], int]],
    seconds: float,
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Units per second of ``clock`` of each path (each call returns the units it made), in
    every one of ``rounds`` interleaved rounds.

    Round-robin, not one path after another, and the order rotates each round: on a shared
    machine load drifts over seconds, and interleaving makes every path see the same drift.
    Every round is kept — the caller reports the median and the range, never the best. For
    pure CPU work in one thread, ``time.process_time`` leaves out the other processes' turns
    on the cores, which wall time would count.
    """
    loops: dict[str, int] = {}
    units: dict[str, int] = {}
    for name, fn in paths.items():
        units[name] = fn()  # warm up and size a round to ~seconds / rounds per path
        start = clock()
        fn()
        once = max(clock() - start, 1e-9)
        loops[name] = max(1, int(seconds / rounds / once))
    results: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    gc.collect()
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = paths[name]
            start = clock()
            for _ in range(loops[name]):
                fn()
            elapsed = clock() - start
            results[name].append(units[name] * loops[name] / elapsed)
    return results


def projector_path(
    adapter: Any,
    contexts: Sequence[ProjectorContext],
    streams: list[list[Envelope]],
    batch: int,
    count: int,
) -> Callable[[], int]:
    """The gateway's own path through ``adapter``'s projectors: feed every envelope of each
    stream and render each feed's messages (``batch`` 1: a live subscriber), or every
    ``batch`` envelopes' messages with one render (a backlog: replay, catch-up from the
    journal, a slow client). A pass returns ``count``, the messages it makes."""
    chunked = [[s[i : i + batch] for i in range(0, len(s), batch)] for s in streams]

    def live() -> int:
        render = adapter.render
        for context, envelopes in zip(contexts, streams, strict=True):
            projector = adapter.projector(context)
            render(projector.start())
            feed = projector.feed
            for envelope in envelopes:
                out = feed(envelope)
                if out:
                    render(out)
            render(projector.close())
        return count

    def drain() -> int:
        render = adapter.render
        for context, groups in zip(contexts, chunked, strict=True):
            projector = adapter.projector(context)
            pending = projector.start()
            feed = projector.feed
            for group in groups:
                for envelope in group:
                    pending += feed(envelope)
                render(pending)
                pending = []
            render(projector.close())
        return count

    return live if batch == 1 else drain
