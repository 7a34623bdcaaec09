"""Memory loads against ``loopgate serve`` in another process (the soak script and a test).

Peak RSS is the kernel's own high-water mark (``VmHWM``), reset before each phase through
``/proc/PID/clear_refs``, so a short peak between two samples is not missed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from benchmarks._common import REPO, ProcStats, free_port

MIB = 1 << 20
# One ingest line under the default max_line_bytes (2 MiB), as in the measurement.
BIG_EVENT = int(1.9 * MIB)


@dataclass
class Phase:
    name: str
    rss_before_mib: float
    peak_mib: float
    rss_after_mib: float
    detail: str = ""


@dataclass
class Server(ProcStats):
    base: str
    pid: int
    port: int


@contextmanager
def serve(*args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """``loopgate serve`` with these flags and ``LOOPGATE_*`` variables; SIGINT at the end."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopgate", "serve", "--port", str(port), *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = Server(f"http://127.0.0.1:{port}", proc.pid, port)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("loopgate serve did not start")
            try:
                if httpx.get(f"{server.base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.02)  # polling a child's readiness: there is no event to wait on
        yield server
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def event_line(size: int, tag: str = "") -> bytes:
    payload = {"kind": "tool_result", "data": {"id": tag or "t", "result": "x" * size}}
    return json.dumps(payload).encode() + b"\n"


@dataclass
class Pushed:
    run_id: str
    accepted: int  # events the gateway accepted (its last_seq)
    refused: str | None  # the problem detail that ended the pushing, if one did


def push_run(client: httpx.Client, events: int, size: int, *, end: bool = True) -> Pushed:
    """One ingest run of ``events`` events of ``size`` bytes, 4 per request, until done or
    refused (a run past a bound is ended with 413)."""
    run_id = client.post("/v1/runs", json={"source": "ingest"}).json()["id"]
    accepted = 0
    for start in range(0, events, 4):
        lines = b"".join(event_line(size, f"{run_id}:{i}") for i in range(start, start + 4))
        response = client.post(f"/v1/runs/{run_id}/events", content=lines)
        answer = response.json()
        accepted = answer.get("last_seq") or accepted
        if response.status_code != 200:
            return Pushed(run_id, accepted, answer.get("detail", response.text))
    if end:
        client.post(f"/v1/runs/{run_id}/events?end=1", content=b"")
    return Pushed(run_id, accepted, None)


def ingest_runs(server: Server, runs: int = 4, events: int = 134) -> Phase:
    """``runs`` ingest runs at once, each pushing up to ``events`` events of 1.9 MiB (134:
    as many as the default max_run_bytes, 256 MiB, lets through)."""
    before = server.rss()
    server.reset_peak()
    pushed: list[Pushed] = []

    def one() -> None:
        with httpx.Client(base_url=server.base, timeout=120) as client:
            pushed.append(push_run(client, events, BIG_EVENT))

    threads = [threading.Thread(target=one) for _ in range(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    mib = sum(p.accepted for p in pushed) * BIG_EVENT / MIB
    ended = sum(p.refused is not None for p in pushed)
    detail = f"{runs} runs of up to {events} × 1.9 MiB; {mib:.0f} MiB accepted, {ended} ended (413)"
    return Phase(
        f"{runs} ingest runs of 1.9 MiB events", before, server.peak(), server.rss(), detail
    )


def stuck_readers(server: Server, run_id: str, clients: int = 5, timeout_s: float = 120) -> Phase:
    """``clients`` SSE requests for a big finished run that never read a byte."""
    before = server.rss()
    server.reset_peak()
    socks = []
    for _ in range(clients):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        request = f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n"
        sock.sendall(request.encode())
        socks.append(sock)
    deadline = time.monotonic() + timeout_s
    seen = 0
    # Wait for all of them to attach, then to be cut off (write_timeout_s).
    while time.monotonic() < deadline:
        try:
            now = httpx.get(f"{server.base}/v1/runs/{run_id}", timeout=10).json()["subscribers"]
        except httpx.TransportError:
            continue  # a server busy copying a giant write answers late
        seen = max(seen, now)
        if seen == clients and now == 0:
            break
        time.sleep(0.05)
    cut_off_at = server.rss()
    peak = server.peak()
    for sock in socks:
        sock.close()
    detail = f"{seen} attached, cut off; RSS {cut_off_at - before:+.0f} MiB while still open"
    return Phase(f"{clients} non-reading SSE clients", before, peak, server.rss(), detail)


def over_the_bound(server: Server, runs: int = 24, events: int = 8) -> Phase:
    """Finished runs past ``max_retained_bytes`` (memory journal): the oldest leave."""
    before = server.rss()
    server.reset_peak()
    ids = []
    with httpx.Client(base_url=server.base, timeout=60) as client:
        for _ in range(runs):
            ids.append(push_run(client, events, BIG_EVENT).run_id)
        codes = [client.get(f"/v1/runs/{i}").status_code for i in ids]
    detail = (
        f"{runs} runs × {events} × 1.9 MiB; {codes.count(410)} answer 410, {codes.count(200)} kept"
    )
    return Phase("memory journal over its bound", before, server.peak(), server.rss(), detail)
