"""Clients that flood and read nothing, against a real `loopgate serve` and the stdio commands
(issue 13, item 4): the reader stops reading, memory stays bounded, the client is cut off with
one log line and no traceback, and everyone else is still served."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import sys
from collections.abc import Callable

import httpx
import pytest

from benchmarks.hostile_loads import bad_frame, initialize, run_list
from tests.gateway.harness import REPO
from tests.hostile.support import Child, flood_until_cut_off, rss_mib, serve, ws_handshake

# Measured before the fix: ~100k frames took /acp from 106 to 510 MB.
MAX_GROWTH_MIB = 40
WRITE_TIMEOUT_S = "1"

FLOODS: dict[str, tuple[str, Callable[[int], bytes], str]] = {
    "acp": ("/acp", initialize, "loopgate.acp"),
    "jsonrpc": ("/rpc/ws", run_list, "loopgate.jsonrpc"),
    "agui": ("/agui/ws", bad_frame, "loopgate.agui"),
    "ingest": ("ingest", bad_frame, "loopgate.ingest"),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with serve(tmp_path_factory.mktemp("floods"), "--write-timeout", WRITE_TIMEOUT_S) as server:
        yield server


@pytest.mark.parametrize("name", list(FLOODS))
def test_a_flooding_websocket_client_is_cut_off_with_bounded_memory_and_one_log_line(
    served: Child, name: str
) -> None:
    path, frame_for, logger = FLOODS[name]
    if path == "ingest":
        run = httpx.post(f"{served.base}/v1/runs", json={"source": "ingest"}).json()
        path = f"/v1/runs/{run['id']}/ingest"
    log_before = served.log()
    baseline = served.rss()
    served.reset_peak()
    sock, head = ws_handshake(served.port, path)
    assert head.startswith(b"HTTP/1.1 101"), head
    flood = flood_until_cut_off(sock, frame_for, timeout=30)
    sock.close()
    peak = served.peak()
    # Everyone else is still served, on the same socket type.
    other, head = ws_handshake(served.port, "/acp")
    assert head.startswith(b"HTTP/1.1 101")
    other.sendall(initialize(1))
    assert b'"protocolVersion"' in other.recv(65536)
    other.close()
    assert httpx.get(f"{served.base}/healthz").status_code == 200

    assert flood.frames > 1000, "a flood worth the name"
    assert peak - baseline < MAX_GROWTH_MIB, (baseline, peak, flood)
    log = served.log()[len(log_before) :]
    assert "Traceback" not in log
    cut_offs = [line for line in log.splitlines() if "cut off" in line]
    assert len(cut_offs) == 1 and logger in cut_offs[0], log[-3000:]


def _child(command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "loopgate", command],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize(
    ("command", "method"), [("acp", "initialize"), ("rpc", "run.list")], ids=["acp", "rpc"]
)
def test_a_stdio_client_that_reads_nothing_stops_the_reader_with_bounded_memory(
    command: str, method: str
) -> None:
    child = _child(command)
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    params = {"protocolVersion": 1} if method == "initialize" else {}

    def line(n: int) -> bytes:
        message = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        return json.dumps(message).encode() + b"\n"

    try:
        # One round trip first: the child is ready, its memory is what serving costs.
        child.stdin.write(line(0))
        child.stdin.flush()
        assert json.loads(child.stdout.readline())["id"] == 0
        baseline = peak = rss_mib(child.pid)
        stdin = child.stdin.fileno()
        fcntl.fcntl(stdin, fcntl.F_SETFL, fcntl.fcntl(stdin, fcntl.F_GETFL) | os.O_NONBLOCK)
        lines, pending = 1, b""
        while True:
            if not pending:
                pending = line(lines)
            # Two seconds in which the child takes no byte: it has stopped reading.
            _, writable, _ = select.select([], [stdin], [], 2.0)
            if not writable:
                break
            pending = pending[os.write(stdin, pending) :]
            if not pending:
                lines += 1
                if not lines % 2000:
                    peak = max(peak, rss_mib(child.pid))
            assert lines < 2_000_000, "the child never stopped reading"
        peak = max(peak, rss_mib(child.pid))
        assert peak - baseline < MAX_GROWTH_MIB, (baseline, peak)
        # Once its answers are read, it answers every line it took.
        fcntl.fcntl(stdin, fcntl.F_SETFL, fcntl.fcntl(stdin, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        child.stdin.write(pending)
        child.stdin.close()
        last = lines if pending else lines - 1
        answered = sorted(json.loads(a)["id"] for a in child.stdout.read().splitlines())
        assert answered == list(range(1, last + 1))
        assert child.wait(30) == 0
        assert b"Traceback" not in child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
