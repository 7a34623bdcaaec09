"""A ``--loop-cmd`` child that floods its stderr, or writes a line too long for stdout: the
gateway's stderr and memory stay within their bounds, and the runs end as the docs say."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from loopgate.gateway.plugs.stderr import StderrBounds, StderrRelay
from loopgate.gateway.plugs.wire import BoundedLines, Cut
from tests.gateway.harness import REPO, free_port, wait_healthy
from tests.gateway.sse_client import envelopes, read_stream
from tests.hostile.support import serve
from tests.plugs.plugs import stdio_command
from tests.plugs.sample_loop import script_for
from tests.plugs.stderr_flood import LINE, LONG_LINE
from tests.waiting import wait_until

# The defaults (gateway/settings.py), which these tests hold to what docs/loops.md says.
MAX_LINE = 2 << 20
STDERR_LINE = 16 << 10
STDERR_RATE = 64 << 10
STDERR_BURST = 1 << 20
MARKER = f" [cut: line longer than {STDERR_LINE} bytes]"
TOO_LONG = f"the loop process sent a line longer than the limit of {MAX_LINE} bytes"


def start_run(base: str, prompt: str) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def events_of(base: str, run_id: str) -> list[dict[str, Any]]:
    return [{"kind": e["kind"], "data": e["data"]} for e in envelopes(read_stream(base, run_id))]


def count(text: str) -> int:
    return int(text.replace(",", ""))


def test_a_child_flooding_its_stderr_is_relayed_within_the_bounds(tmp_path: Path) -> None:
    produced_file, stop_file = tmp_path / "produced", tmp_path / "stop"
    flood = shlex.join(
        [sys.executable, "-m", "tests.plugs.stderr_flood", str(produced_file), str(stop_file)]
    )
    began = time.monotonic()
    with serve(
        tmp_path, "--loop-cmd", flood, env={"LOOPGATE_LOOP_STDERR_REPORT_S": "1"}
    ) as gateway:
        wait_until(lambda: LINE.decode() in gateway.log(), 30, "the flood")
        # While the child floods: the gateway answers, and a run on that child completes.
        assert httpx.get(f"{gateway.base}/healthz", timeout=5).status_code == 200
        assert events_of(gateway.base, start_run(gateway.base, "hello")) == script_for("hello")
        stop_file.touch()
        produced = count(
            wait_until(lambda: produced_file.exists() and produced_file.read_text(), 30, "its end")
        )
        # Summed up while it happens, once a report interval.
        wait_until(lambda: "the loop process's stderr, the last" in gateway.log(), 10, "a report")
    elapsed = time.monotonic() - began
    log = gateway.log()

    # And in all, once the child's stderr closed: every byte it wrote was read.
    final = re.search(r"stderr closed: in all, dropped ([\d,]+) of ([\d,]+) bytes", log)
    assert final is not None, log[-2000:]
    dropped, received = count(final[1]), count(final[2])
    assert received == produced
    relayed = received - dropped
    child_lines = [ln for ln in log.splitlines(keepends=True) if ln[:1] in ("f", "L")]
    # Whole lines as the child wrote them; the long one cut to length and marked.
    assert set(child_lines) == {LINE.decode(), LONG_LINE[:STDERR_LINE].decode() + MARKER + "\n"}
    assert sum(map(len, child_lines)) == relayed + len(MARKER) + 1
    bound = STDERR_BURST + STDERR_RATE * elapsed
    assert relayed <= bound
    log_size = len(log.encode())
    assert log_size <= bound + (16 << 10), f"{log_size} bytes in the gateway's stderr"
    assert produced > 4 * log_size, f"the flood ({produced} bytes) proves nothing"


def test_a_gateway_stderr_nobody_reads_stalls_neither_the_gateway_nor_the_child(
    tmp_path: Path,
) -> None:
    """A stuck log shipper: the relay's writer thread waits on the full pipe, the rest goes on."""
    produced_file, stop_file = tmp_path / "produced", tmp_path / "stop"
    flood = shlex.join(
        [sys.executable, "-m", "tests.plugs.stderr_flood", str(produced_file), str(stop_file)]
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopgate", "serve", "--port", str(port), "--loop-cmd", flood],
        cwd=REPO,
        env={**os.environ, "LOOPGATE_LOOP_STDERR_REPORT_S": "3600"},  # nothing else to log
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        pipe = proc.stderr.fileno()
        size = fcntl.fcntl(pipe, fcntl.F_GETPIPE_SZ)
        wait_until(lambda: unread(pipe) > size - 4096, 30, "the gateway's stderr to fill up")
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        assert events_of(base, start_run(base, "hello")) == script_for("hello")
        stop_file.touch()
        wait_until(produced_file.exists, 30, "the child to finish its flood")
    finally:
        stop_file.touch()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130  # stopped by SIGINT, as `loopgate serve` is
    assert b"stderr closed: in all, dropped" in err


def unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_a_line_over_max_line_bytes_ends_its_run_and_not_the_child(tmp_path: Path) -> None:
    with serve(tmp_path, "--loop-cmd", stdio_command()) as gateway:
        base = gateway.base
        assert events_of(base, start_run(base, "hello")) == script_for("hello")
        other = start_run(base, "slow words")
        gateway.reset_peak()
        before = gateway.peak()
        huge = events_of(base, start_run(base, f"huge {100 << 20}"))
        assert huge[-2:] == [
            {"kind": "error", "data": {"message": TOO_LONG, "phase": "loop"}},
            {
                "kind": "completion",
                "data": {"status": "failed", "reason": "loop_invalid_event", "message": TOO_LONG},
            },
        ]
        # The child takes the next run once it wrote the whole line, which the gateway read
        # in bounded chunks and threw away: the 100 MiB were never held.
        assert events_of(base, start_run(base, "hello again")) == script_for("hello again")
        grown = gateway.peak() - before
        assert grown < 16, f"peak RSS grew by {grown:.1f} MiB"
        # The child was neither stopped nor restarted: its other run goes on, and answers.
        assert httpx.get(f"{base}/v1/runs/{other}", timeout=5).json()["state"] == "running"
        assert httpx.post(f"{base}/v1/runs/{other}/cancel", timeout=5).status_code == 202
        assert events_of(base, other)[-1]["data"] == {
            "status": "cancelled",
            "reason": "the loop saw the cancel",
        }
    log = gateway.log()
    assert "starting it again" not in log and "Traceback" not in log
    assert f"longer than max_line_bytes ({MAX_LINE}); discarded, it ends run " in log


def test_a_line_too_long_naming_no_run_ends_every_open_run(tmp_path: Path) -> None:
    with serve(tmp_path, "--loop-cmd", stdio_command()) as gateway:
        base = gateway.base
        other = start_run(base, "slow words")
        wait_until(
            lambda: httpx.get(f"{base}/v1/runs/{other}", timeout=5).json()["last_seq"] > 1,
            10,
            "the slow run's first words",
        )
        anonymous = events_of(base, start_run(base, f"huge {8 << 20} anonymous"))
        # Either may have lost an event: neither goes on as if nothing happened.
        for events in (anonymous, events_of(base, other)):
            assert events[-1]["data"] == {
                "status": "failed",
                "reason": "loop_invalid_event",
                "message": TOO_LONG,
            }
        assert events_of(base, start_run(base, "hello")) == script_for("hello")
    assert "it ends all 2 open runs (it names none)" in gateway.log()


# --- the pieces, sans IO ---------------------------------------------------------------------

chunkings = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30)
texts = st.lists(st.sampled_from([b"a", b"bb", b"\n", b"ccccccccc"]), max_size=40).map(b"".join)


def collect(written: list[bytes]) -> Callable[[bytes], bool]:
    def write(data: bytes) -> bool:
        written.append(data)
        return True

    return write


def _chunks(data: bytes, sizes: list[int]) -> list[bytes]:
    chunks, pos, i = [], 0, 0
    while pos < len(data):
        chunks.append(data[pos : pos + sizes[i % len(sizes)]])
        pos += sizes[i % len(sizes)]
        i += 1
    return chunks


@given(texts, chunkings, st.integers(min_value=1, max_value=12))
def test_bounded_lines_are_the_lines_cut_to_length_however_the_bytes_arrive(
    data: bytes, sizes: list[int], limit: int
) -> None:
    lines = BoundedLines(limit)
    got = [line for chunk in _chunks(data, sizes) for line in lines.feed(chunk)]
    assert [(bytes(line), not isinstance(line, Cut)) for line in got] == _expected(data, limit)
    rest = data.split(b"\n")[-1]
    assert lines.pending == (rest if len(rest) <= limit else b"")


def _expected(data: bytes, limit: int) -> list[tuple[bytes, bool]]:
    """Complete lines whole; a long one as its head, as soon as it is long (even unfinished)."""
    *complete, rest = data.split(b"\n")
    out = [(line[:limit], len(line) <= limit) for line in complete]
    if len(rest) > limit:
        out.append((rest[:limit], False))
    return out


@given(texts, chunkings, st.lists(st.floats(min_value=0, max_value=2), min_size=1))
def test_the_relay_writes_whole_lines_within_the_bucket_and_accounts_for_every_byte(
    data: bytes, sizes: list[int], pauses: list[float]
) -> None:
    now = [0.0]
    written: list[bytes] = []
    bounds = StderrBounds(max_line_bytes=6, bytes_per_s=10, burst_bytes=60, report_every_s=1)
    relay = StderrRelay(bounds, collect(written), clock=lambda: now[0])
    for i, chunk in enumerate(_chunks(data, sizes)):
        now[0] += pauses[i % len(pauses)]
        relay.feed(chunk)
    relay.close()
    assert relay.tally.received == len(data)
    assert sum(map(len, written)) <= relay.bucket.capacity + 10 * now[0]
    marker = relay.marker + b"\n"
    relayed = sum(len(w) - len(marker) if w.endswith(marker) else len(w) for w in written)
    # A last line without its newline got one from the relay, not from the child.
    rest = data.split(b"\n")[-1]
    relayed -= bool(rest) and len(rest) <= 6 and written[-1:] == [rest + b"\n"]
    assert relay.tally.relayed == relayed
    for w in written:
        assert w.endswith(b"\n") and len(w.removesuffix(marker)) <= 7


def test_past_a_refused_line_its_chunk_is_dropped_and_the_next_one_tried() -> None:
    written: list[bytes] = []
    bounds = StderrBounds(max_line_bytes=8, bytes_per_s=4, burst_bytes=10, report_every_s=1)
    relay = StderrRelay(bounds, collect(written), clock=lambda: 0.0)
    assert relay.bucket.capacity == 8 + len(relay.marker) + 1  # a cut line always can pass
    # The cut line does not fit after three others; "2" and "3" would, but go with it.
    relay.feed(b"1\n" * 3 + b"toolong!!x\n2\n3\npar")
    relay.feed(b"tial\n")
    assert written == [b"1\n"] * 3 + [b"partial\n"]
    assert (relay.tally.cut_lines, relay.tally.dropped_lines) == (1, 3)
    assert (relay.tally.received, relay.tally.relayed) == (29, 14)
