"""Hostile clients against ``loopgate serve`` in another process (the soak script's
``slowloris`` and ``flood`` parts; tests/hostile uses the raw WebSocket client).

Each load opens its own server, so that one load's leftovers (sockets waiting for their
timeout, a journal) never skew the next one's figures. Peak RSS is the kernel's high-water mark
(``VmHWM``), reset through ``/proc/PID/clear_refs`` before the load.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import resource
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._common import REPO, ProcStats, free_port, table


@dataclass
class Child(ProcStats):
    base: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    def __post_init__(self) -> None:
        ProcStats.__init__(self, self.proc.pid)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def serve(
    log_dir: Path, *args: str, env: dict[str, str] | None = None, nofile: int | None = None
) -> Iterator[Child]:
    """``loopgate serve`` with its log in a file (a pipe nobody reads would stall a server that
    logs a lot, which is what some loads look for), healthy before this yields."""
    port = free_port()
    log_path = log_dir / f"serve-{port}.log"

    def limit_fds() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    argv = [sys.executable, "-m", "loopgate", "serve", "--port", str(port)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*argv, *args],
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=limit_fds,
        )
    child = Child(f"http://127.0.0.1:{port}", port, proc, log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"loopgate serve did not start: {child.log()[-2000:]}")
            try:
                if httpx.get(f"{child.base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        yield child
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def still_served(server_port: int, client_ports: set[int] | None = None) -> int:
    """How many connections (of these clients, or all) the server on this port still holds
    open: its side of each, from /proc/net/tcp, leaves ESTABLISHED once it closes one."""
    held = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if int(local.split(":")[1], 16) == server_port and state == "01":
            held += client_ports is None or int(remote.split(":")[1], 16) in client_ports
    return held


# --- raw WebSocket ----------------------------------------------------------------------------


def ws_handshake(
    port: int, path: str, host: str | None = None, extensions: str | None = None
) -> tuple[socket.socket, bytes]:
    """A client socket after the upgrade request, and the server's answer head (101 or not)."""
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    offer = f"Sec-WebSocket-Extensions: {extensions}\r\n" if extensions else ""
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\n{offer}\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, head


def ws_frame(text: str) -> bytes:
    """One masked text frame (clients must mask)."""
    data = text.encode()
    mask = os.urandom(4)
    n = len(data)
    if n < 126:
        head = bytes([0x81, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x81, 0x80 | 126]) + struct.pack("!H", n)
    else:
        head = bytes([0x81, 0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def initialize(n: int) -> bytes:
    params = {"protocolVersion": 1}
    return ws_frame(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": params})
    )


def run_list(n: int) -> bytes:
    return ws_frame(json.dumps({"jsonrpc": "2.0", "id": n, "method": "run.list", "params": {}}))


def bad_frame(n: int) -> bytes:
    return ws_frame(json.dumps({"not": "what this endpoint takes", "n": n}))


# Endpoint → (path, the frames its flood sends). "ingest" gets a run of its own.
WS_FLOODS: dict[str, tuple[str, Callable[[int], bytes]]] = {
    "/acp": ("/acp", initialize),
    "/rpc/ws": ("/rpc/ws", run_list),
    "/agui/ws": ("/agui/ws", bad_frame),
    "ingest WS": ("ingest", bad_frame),
}


@dataclass
class Flood:
    frames: int  # frames the client's kernel took (not all of them reached the server)
    cut_off_after_s: float  # until the server ended the connection (the client's send failed)


def flood_until_cut_off(
    sock: socket.socket, frame_for: Callable[[int], bytes], timeout: float = 120
) -> Flood:
    """Send frames as fast as the socket takes them and read nothing, until the server ends
    the connection."""
    sock.setblocking(False)
    started = time.monotonic()
    sent, pending = 0, b""
    while time.monotonic() - started < timeout:
        if not pending:
            pending = frame_for(sent)
        try:
            taken = sock.send(pending)
        except BlockingIOError:
            select.select([], [sock], [], 0.05)
            continue
        except OSError:
            return Flood(sent, time.monotonic() - started)
        pending = pending[taken:]
        if not pending:
            sent += 1
    raise RuntimeError(f"the server never cut the flooding client off ({sent} frames sent)")


def ws_path(child: Child, path: str) -> str:
    if path != "ingest":
        return path
    run = httpx.post(f"{child.base}/v1/runs", json={"source": "ingest"}).json()
    return f"/v1/runs/{run['id']}/ingest"


# --- the loads --------------------------------------------------------------------------------


@dataclass
class Slowloris:
    sockets: int
    answered_503: int
    closed_by_timeout: int
    still_open: int
    close_p50_s: float
    close_max_s: float
    healthz: int  # a well-behaved request in the middle of it: its status …
    healthz_ms: float  # … and how long it took
    answered_408: int = 0  # slow bodies: answered, then closed at the body deadline
    other: int = 0  # an ordinary request meanwhile: its status


SLOW_HEAD = (b"GET /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n")
SLOW_BODY = (
    b"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    b"content-length: 100000\r\n\r\n{",
    b" ",
)


def slowloris(
    child: Child, sockets: int, horizon_s: float, slow: tuple[bytes, bytes] = SLOW_HEAD
) -> Slowloris:
    """``sockets`` connections that send ``slow[0]`` (by default a request head, never
    finished), then ``slow[1]`` once a second; how each ends within ``horizon_s``."""
    selector = selectors.DefaultSelector()
    opened = time.monotonic()
    for _ in range(sockets):
        sock = socket.create_connection(("127.0.0.1", child.port))
        sock.sendall(slow[0])
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    # The server may still be accepting the last of them: an ordinary request is refused once
    # it has (if they are more than the cap), then a health check is made.
    for _ in range(50):
        other = httpx.get(f"{child.base}/v1/runs", timeout=30).status_code
        if other == 503:
            break
        time.sleep(0.1)
    started = time.monotonic()
    healthz = httpx.get(f"{child.base}/healthz", timeout=30).status_code
    healthz_ms = (time.monotonic() - started) * 1000
    refused, timed_out, answered_408, closes = 0, 0, 0, []
    trickled = time.monotonic()
    while selector.get_map() and time.monotonic() - opened < horizon_s:
        for key, _ in selector.select(0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except ConnectionResetError:
                data = b""
            if data.startswith(b"HTTP/1.1 503"):
                refused += 1
            elif data.startswith(b"HTTP/1.1 408"):
                answered_408 += 1
                closes.append(time.monotonic() - opened)
            elif not data:
                timed_out += 1
                closes.append(time.monotonic() - opened)
            else:
                continue  # the rest of a 503 body
            selector.unregister(sock)
            sock.close()
        if time.monotonic() - trickled >= 1.0:
            trickled = time.monotonic()
            for key in list(selector.get_map().values()):
                with contextlib.suppress(OSError):
                    key.fileobj.send(slow[1])  # type: ignore[union-attr]
    left = len(selector.get_map())
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    closes.sort()
    return Slowloris(
        sockets,
        refused,
        timed_out,
        left,
        closes[len(closes) // 2] if closes else float("nan"),
        closes[-1] if closes else float("nan"),
        healthz,
        healthz_ms,
        answered_408,
        other,
    )


def slow_body_part(sockets: int) -> None:
    """Bodies trickled a byte a second (issue 29: 1,200 of them held the cap for good)."""
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp)) as server:
        r = slowloris(server, sockets, horizon_s=60, slow=SLOW_BODY)
    row = [
        sockets,
        r.answered_503,
        r.answered_408,
        r.still_open,
        f"{r.close_p50_s:.1f} / {r.close_max_s:.1f}",
        f"{r.healthz} in {r.healthz_ms:.0f} ms",
        r.other,
    ]
    header = ["sockets", "answered 503", "answered 408", "open at 60 s", "408 after s p50 / max"]
    header += ["/healthz meanwhile", "GET /v1/runs meanwhile"]
    table("slow bodies: a byte a second (defaults: body timeout 30 s, cap 1,000)", header, [row])


@dataclass
class Exhaustion:
    nofile: int
    sockets: int
    cpu_share: float  # of one core, over the interval
    answered_503: bool
    log_lines: int
    too_many_open_files: int
    recovered_s: float


def fd_exhaustion(child: Child, nofile: int, sockets: int, interval_s: float) -> Exhaustion:
    """More idle connections than file descriptors; the server's CPU meanwhile, from /proc."""
    held = [socket.create_connection(("127.0.0.1", child.port), timeout=10) for _ in range(sockets)]
    try:
        refused = httpx.get(f"{child.base}/healthz", timeout=10).status_code == 503
    except httpx.TransportError:
        refused = False
    busy, started = child.cpu_s(), time.monotonic()
    time.sleep(interval_s)
    share = (child.cpu_s() - busy) / (time.monotonic() - started)
    for sock in held:
        sock.close()
    closed = time.monotonic()
    while True:
        try:
            if httpx.get(f"{child.base}/healthz", timeout=10).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    recovered = time.monotonic() - closed
    log = child.log()
    return Exhaustion(
        nofile,
        sockets,
        share,
        refused,
        len(log.splitlines()),
        log.count("Too many open files"),
        recovered,
    )


@dataclass
class WsFlood:
    endpoint: str
    frames: int
    cut_off_after_s: float
    rss_before_mib: float
    peak_mib: float
    cut_off_lines: int
    tracebacks: int
    others_served: bool


def ws_flood(child: Child, endpoint: str) -> WsFlood:
    path, frame_for = WS_FLOODS[endpoint]
    path = ws_path(child, path)
    log_before = len(child.log())
    before = child.rss()
    child.reset_peak()
    sock, head = ws_handshake(child.port, path)
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"{endpoint}: {head!r}")
    flood = flood_until_cut_off(sock, frame_for)
    sock.close()
    other, head = ws_handshake(child.port, "/acp")
    other.sendall(initialize(1))
    others_served = head.startswith(b"HTTP/1.1 101") and b"protocolVersion" in other.recv(65536)
    other.close()
    log = child.log()[log_before:]
    return WsFlood(
        endpoint,
        flood.frames,
        flood.cut_off_after_s,
        before,
        child.peak(),
        sum("cut off" in line for line in log.splitlines()),
        log.count("Traceback"),
        others_served,
    )


@dataclass
class StdioFlood:
    command: str
    lines: int  # lines the child took before it stopped reading
    rss_before_mib: float
    peak_mib: float
    answered: int
    tracebacks: int


def stdio_flood(command: str, stall_s: float = 2.0) -> StdioFlood:
    """``loopgate acp`` / ``loopgate rpc`` fed lines by a parent that reads nothing until the
    child stops taking them (``stall_s`` without a byte), then reads every answer."""
    method, params = (
        ("initialize", {"protocolVersion": 1}) if command == "acp" else ("run.list", {})
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "loopgate", command],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None

    def line(n: int) -> bytes:
        message = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        return json.dumps(message).encode() + b"\n"

    def status(key: str) -> float:
        for row in Path(f"/proc/{child.pid}/status").read_text().splitlines():
            if row.startswith(key + ":"):
                return int(row.split()[1]) / 1024
        raise RuntimeError(key)

    try:
        child.stdin.write(line(0))
        child.stdin.flush()
        child.stdout.readline()
        before = status("VmRSS")
        Path(f"/proc/{child.pid}/clear_refs").write_text("5")
        stdin = child.stdin.fileno()
        fcntl.fcntl(stdin, fcntl.F_SETFL, fcntl.fcntl(stdin, fcntl.F_GETFL) | os.O_NONBLOCK)
        lines, pending = 1, b""
        while True:
            if not pending:
                pending = line(lines)
            _, writable, _ = select.select([], [stdin], [], stall_s)
            if not writable:
                break
            pending = pending[os.write(stdin, pending) :]
            if not pending:
                lines += 1
        peak = status("VmHWM")
        fcntl.fcntl(stdin, fcntl.F_SETFL, fcntl.fcntl(stdin, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        child.stdin.write(pending)
        child.stdin.close()
        answered = len(child.stdout.read().splitlines())
        child.wait(60)
        tracebacks = child.stderr.read().count(b"Traceback")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return StdioFlood(command, lines, before, peak, answered, tracebacks)


# --- the soak script's parts ------------------------------------------------------------------


def slowloris_part(sockets: int, nofile: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, flags in (
            ("defaults (header timeout 15 s, cap 1,000)", ()),
            ("--max-connections 5000", ("--max-connections", "5000")),
        ):
            with serve(Path(tmp), *flags) as server:
                r = slowloris(server, sockets, horizon_s=90)
            rows.append(
                [
                    label,
                    sockets,
                    r.answered_503,
                    r.closed_by_timeout,
                    r.still_open,
                    f"{r.close_p50_s:.1f} / {r.close_max_s:.1f}",
                    f"{r.healthz} in {r.healthz_ms:.0f} ms",
                ]
            )
        header = ["server", "sockets", "answered 503", "closed at the timeout", "open at 90 s"]
        header += ["closed after s p50 / max", "a request meanwhile got"]
        table("slowloris: a header line a second, never a whole head", header, rows)
        with serve(Path(tmp), "--header-timeout", "60", nofile=nofile) as server:
            e = fd_exhaustion(server, nofile, sockets, interval_s=10)
    row = [
        e.nofile,
        e.sockets,
        f"{e.cpu_share:.1%}",
        "503" if e.answered_503 else "no answer",
        e.log_lines,
        e.too_many_open_files,
        f"{e.recovered_s:.2f}",
    ]
    header = ["ulimit -n", "idle sockets", "server CPU over 10 s", "a new request got"]
    header += ["log lines (whole run)", '"Too many open files"', "served again after s"]
    table("out of file descriptors (header timeout 60 s)", header, [row])


def flood_part(write_timeout: str) -> None:
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(Path(tmp), "--write-timeout", write_timeout) as server,
    ):
        for endpoint in WS_FLOODS:
            f = ws_flood(server, endpoint)
            rows.append(
                [
                    endpoint,
                    f"{f.frames:,}",
                    f"{f.cut_off_after_s:.1f}",
                    f"{f.rss_before_mib:.0f}",
                    f"{f.peak_mib:.0f}",
                    f.cut_off_lines,
                    f.tracebacks,
                    f.others_served,
                ]
            )
    header = ["WebSocket", "frames sent", "cut off after s", "RSS before MiB", "peak MiB"]
    header += ["log lines", "tracebacks", "others served"]
    title = f"flood: a client that sends and reads nothing (--write-timeout {write_timeout})"
    table(title, header, rows)
    rows = []
    for command in ("acp", "rpc"):
        s = stdio_flood(command)
        rows.append(
            [
                f"loopgate {command}",
                f"{s.lines:,}",
                f"{s.rss_before_mib:.0f}",
                f"{s.peak_mib:.0f}",
                f"{s.answered:,}",
                s.tracebacks,
            ]
        )
    header = ["stdio", "lines taken before it stopped reading", "RSS before MiB", "peak MiB"]
    header += ["answered once read", "tracebacks"]
    table("flood: a parent that writes lines and reads nothing, then reads", header, rows)
