"""What an idle WebSocket costs the gateway, and whether the memory comes back once it closes.

    .venv/bin/python -m benchmarks.ws_idle                      # 2,000 on /rpc/ws, /agui/ws, /acp
    .venv/bin/python -m benchmarks.ws_idle --connections 5000 --endpoint /rpc/ws
    .venv/bin/python -m benchmarks.ws_idle --trace              # + what holds it (tracemalloc)

The server is the gateway as ``loopgate serve`` builds it, in a child process that also takes
commands on its stdin: ``trim`` runs glibc's ``malloc_trim(0)`` (gives the heap's free pages
back to the kernel), ``top`` prints what tracemalloc saw allocated since the last ``mark``.
RSS is read from ``/proc``; the clients are raw sockets in this process (a handshake each, then
nothing), opened after a warm-up of 50 that loads whatever the endpoint imports lazily.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._common import REPO, free_port, table
from benchmarks.hostile_loads import still_served, ws_handshake

WARM_UP = 50


# --- the server child --------------------------------------------------------------------------


def serve_child(port: int, connections: int, trace: bool, compression: bool) -> None:
    import asyncio

    from loopgate.gateway.server import make_server
    from loopgate.gateway.settings import load_settings

    if trace:
        tracemalloc.start(1)
    limit = connections + 2 * WARM_UP
    settings = load_settings(
        os.environ, {"port": port, "max_connections": limit, "ws_compression": compression}
    )
    server = make_server(settings, log_level="warning")
    threading.Thread(target=_commands, daemon=True).start()
    asyncio.run(server.serve())


def _commands() -> None:
    libc = ctypes.CDLL("libc.so.6")
    marked: tracemalloc.Snapshot | None = None
    for line in sys.stdin:
        command = line.strip()
        if command == "gc":
            print(json.dumps({"collected": gc.collect()}), flush=True)
        elif command == "trim":
            libc.malloc_trim(0)
            print(json.dumps({"trimmed": True}), flush=True)
        elif command == "mark" and tracemalloc.is_tracing():
            marked = tracemalloc.take_snapshot()
            print(json.dumps({"marked": True}), flush=True)
        elif command == "top" and marked is not None:
            diff = tracemalloc.take_snapshot().compare_to(marked, "lineno")
            top = [
                {"where": str(stat.traceback[0]), "bytes": stat.size_diff, "count": stat.count_diff}
                for stat in diff[:25]
            ]
            print(json.dumps({"top": top}), flush=True)


# --- the measuring parent ----------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@dataclass
class IdleCost:
    endpoint: str
    compression: bool
    connections: int
    before_mib: float
    open_mib: float
    closed_mib: float
    trimmed_mib: float
    reopened_mib: float
    top: list[dict[str, object]]

    @property
    def per_connection_kib(self) -> float:
        return (self.open_mib - self.before_mib) * 1024 / self.connections


class Child:
    def __init__(self, connections: int, trace: bool, compression: bool) -> None:
        self.port = free_port()
        argv = [sys.executable, "-m", "benchmarks.ws_idle", "--serve", str(self.port)]
        argv += ["--connections", str(connections)] + (["--trace"] if trace else [])
        argv += ["--compression"] if compression else []
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            text=True,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).is_success:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)

    def ask(self, command: str) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer: dict[str, object] = json.loads(self.proc.stdout.readline())
        return answer

    def rss_mib(self) -> float:
        return rss_kib(self.proc.pid) / 1024

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)


# What browsers and the websockets library offer unless told not to.
DEFLATE = "permessage-deflate; client_max_window_bits"


def open_all(port: int, endpoint: str, n: int, deflate: bool = False) -> list[socket.socket]:
    held = []
    for _ in range(n):
        sock, head = ws_handshake(port, endpoint, extensions=DEFLATE if deflate else None)
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"{endpoint}: {head[:80]!r}")
        if deflate and b"permessage-deflate" not in head.lower():
            raise RuntimeError(f"{endpoint}: compression was not negotiated")
        held.append(sock)
    return held


def close_all(port: int, sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()
    deadline = time.monotonic() + 30
    while still_served(port) and time.monotonic() < deadline:
        time.sleep(0.05)


def measure(endpoint: str, connections: int, trace: bool, compression: bool) -> IdleCost:
    """Clients offer compression as browsers do; the server takes it or not."""
    child = Child(connections, trace, compression)
    try:
        close_all(child.port, open_all(child.port, endpoint, WARM_UP, compression))
        if trace:
            child.ask("mark")
        before = child.rss_mib()
        held = open_all(child.port, endpoint, connections, compression)
        opened = child.rss_mib()
        top = child.ask("top")["top"] if trace else []
        close_all(child.port, held)
        closed = child.rss_mib()
        child.ask("gc")
        child.ask("trim")
        trimmed = child.rss_mib()
        # A second round: does it take the memory the first one left, or more?
        close_all(child.port, open_all(child.port, endpoint, connections, compression))
        reopened = child.rss_mib()
    finally:
        child.stop()
    assert isinstance(top, list)
    return IdleCost(
        endpoint, compression, connections, before, opened, closed, trimmed, reopened, top
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--endpoint", action="append", help="default: /rpc/ws, /agui/ws, /acp")
    parser.add_argument("--trace", action="store_true", help="what holds it (slower)")
    parser.add_argument(
        "--compression", action="store_true", help="only with --ws-compression (else both)"
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_child(args.serve, args.connections, args.trace, args.compression)
        return 0
    rows = []
    for endpoint in args.endpoint or ["/rpc/ws", "/agui/ws", "/acp"]:
        for compression in [True] if args.compression else [False, True]:
            cost = measure(endpoint, args.connections, args.trace, compression)
            rows.append(
                [
                    endpoint,
                    "on" if compression else "off",
                    cost.connections,
                    f"{cost.before_mib:.0f}",
                    f"{cost.open_mib:.0f}",
                    f"{cost.per_connection_kib:.1f}",
                    f"{cost.closed_mib:.0f}",
                    f"{cost.trimmed_mib:.0f}",
                    f"{cost.reopened_mib:.0f}",
                ]
            )
            for item in cost.top:
                print(f"  {item['bytes'] / cost.connections:8.0f} B/conn  {item['where']}")
    header = ["endpoint", "compression", "idle WebSockets", "RSS before, MiB", "open, MiB"]
    header += ["KiB each", "closed, MiB", "+ gc, malloc_trim, MiB", "opened again, MiB"]
    table("idle WebSockets: what each costs, and what comes back", header, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
