"""``kill -9`` trials against ``loopgate serve --journal sqlite:…`` (tests and the soak script).

One trial: three ingest runs fed at once — two over HTTP NDJSON in batches of random size, one
over the ingest WebSocket with ``?ack=1`` — each watched live by an SSE client. Once the
pushers have been acknowledged a random number of events (seeded by the trial number), the
gateway is killed with SIGKILL and started again on the same file. Then, for each run, with a
real SSE parser (httpx-sse):

- every acknowledged event is there, at its seq, with its payload;
- the seqs are 1…n once each, and the last is the terminal ``completion{failed,
  server_restarted}`` right after the last committed event;
- every event a live client saw before the kill is there unchanged (no seq was reused);
- a client resuming with ``Last-Event-ID`` (the last seq it saw) gets exactly the rest, ending
  with the terminal event.

Trials chain: the restarted gateway is the next trial's, so N trials cost N + 1 starts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets.sync.client as ws_client
from httpx_sse import connect_sse

REPO = Path(__file__).resolve().parent.parent
PUSH_TIMEOUT_S = 10.0
SERVE = (sys.executable, "-m", "loopgate", "serve")
RESTARTED = {"status": "failed", "reason": "server_restarted"}
# Bounds of one pusher per trial: the kill comes long before, this only caps a slow machine.
MAX_EVENTS_PER_PUSHER = 20_000


@dataclass
class RunLog:
    """What the clients of one run were told before the kill."""

    run_id: str
    transport: str
    acked: dict[int, dict[str, Any]] = field(default_factory=dict)  # seq → data
    seen: list[dict[str, Any]] = field(default_factory=list)  # envelopes a live client got


@dataclass
class TrialResult:
    trial: int
    kill_after: int  # acknowledged events that triggered the kill
    acked: int
    lost: int  # acknowledged but missing or different after the restart
    duplicated: int  # a seq twice, or an acknowledged payload at two seqs
    reused: int  # a seq a live client saw that now holds something else
    resume_errors: int  # a resumed stream that is not exactly the rest
    recover_s: float  # SIGKILL → the restarted gateway answers /healthz
    problems: list[str] = field(default_factory=list)


class Gateway:
    """``loopgate serve`` as a child process on a fixed port, restartable on the same file."""

    def __init__(
        self,
        db: Path,
        port: int,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.db = db
        self.port = port
        self.extra = extra
        self.env = env or {}
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start and wait until healthy; returns the seconds it took."""
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [*SERVE, "--port", str(self.port), "--journal", f"sqlite:{self.db}", *self.extra],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = started + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("loopgate serve exited early")
            with suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return time.monotonic() - started
            time.sleep(0.02)  # polling a child's readiness: there is no event to wait on
        raise RuntimeError("loopgate serve did not become healthy")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def gateway(
    db: Path, port: int, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[Gateway]:
    gw = Gateway(db, port, extra, env)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


class Counter:
    """Acknowledged events across pushers; wakes the trial at its threshold."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.value = 0
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def add(self, n: int) -> None:
        with self.lock:
            self.value += n
            if self.value >= self.threshold:
                self.reached.set()


def push_ndjson(base: str, log: RunLog, rng: random.Random, counter: Counter) -> None:
    sent = 0
    with httpx.Client(base_url=base, timeout=PUSH_TIMEOUT_S) as client:
        while sent < MAX_EVENTS_PER_PUSHER:
            batch = [{"delta": f"{log.run_id[-6:]}:{sent + i}"} for i in range(rng.randint(1, 20))]
            body = "".join(json.dumps({"kind": "content_delta", "data": d}) + "\n" for d in batch)
            try:
                response = client.post(f"/v1/runs/{log.run_id}/events", content=body)
            except httpx.TransportError:
                return  # the gateway is gone: this batch was never acknowledged
            if response.status_code != 200:
                return
            answer = response.json()
            first = answer["last_seq"] - answer["accepted"] + 1
            for offset, data in enumerate(batch):
                log.acked[first + offset] = data
            sent += len(batch)
            counter.add(len(batch))


def push_websocket(base: str, log: RunLog, counter: Counter) -> None:
    """One pusher owns the run and no frame is rejected, so frame k carries seq k."""
    url = base.replace("http", "ws") + f"/v1/runs/{log.run_id}/ingest?ack=1"
    frames: dict[int, dict[str, Any]] = {}
    try:
        with ws_client.connect(url, open_timeout=PUSH_TIMEOUT_S) as ws:

            def read_acks() -> None:
                acked = 0
                with suppress(Exception):
                    for raw in ws:
                        message = json.loads(raw)
                        if message.get("type") == "ack":
                            frame = message["frame"]
                            for k in range(acked + 1, frame + 1):
                                log.acked[k] = frames[k]
                            counter.add(frame - acked)
                            acked = frame

            reader = threading.Thread(target=read_acks, daemon=True)
            reader.start()
            for k in range(1, MAX_EVENTS_PER_PUSHER + 1):
                data = {"delta": f"{log.run_id[-6:]}:{k}"}
                frames[k] = data
                ws.send(json.dumps({"kind": "content_delta", "data": data}))
                if k % 64 == 0 and counter.reached.is_set():
                    break
            reader.join(PUSH_TIMEOUT_S)
    except Exception:
        return


def watch(base: str, log: RunLog) -> None:
    with (
        suppress(Exception),
        httpx.Client(base_url=base, timeout=PUSH_TIMEOUT_S) as client,
        connect_sse(client, "GET", f"/v1/runs/{log.run_id}/events") as source,
    ):
        for event in source.iter_sse():
            log.seen.append(json.loads(event.data))


def read_run(base: str, run_id: str, last_event_id: int | None = None) -> list[dict[str, Any]]:
    headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}
    with (
        httpx.Client(base_url=base, timeout=PUSH_TIMEOUT_S) as client,
        connect_sse(client, "GET", f"/v1/runs/{run_id}/events", headers=headers) as source,
    ):
        source.response.raise_for_status()
        return [json.loads(e.data) for e in source.iter_sse()]


def run_trial(gw: Gateway, trial: int, *, max_kill_after: int = 800) -> TrialResult:
    """Feed three runs, kill the gateway at a seeded moment, restart it, check every run.

    ``gw`` is running when called and running (restarted) when this returns."""
    rng = random.Random(trial)
    kill_after = rng.randint(1, max_kill_after)
    counter = Counter(kill_after)
    logs = []
    for transport in ("ndjson", "ndjson", "websocket"):
        run = httpx.post(f"{gw.base}/v1/runs", json={"source": "ingest"}, timeout=10).json()
        logs.append(RunLog(run["id"], transport))
    threads = [threading.Thread(target=watch, args=(gw.base, log)) for log in logs]
    for log in logs:
        if log.transport == "ndjson":
            seed = rng.randrange(1 << 30)
            target: Any = push_ndjson
            args: tuple[Any, ...] = (gw.base, log, random.Random(seed), counter)
        else:
            target, args = push_websocket, (gw.base, log, counter)
        threads.append(threading.Thread(target=target, args=args))
    for thread in threads:
        thread.start()
    counter.reached.wait(60)
    gw.kill()
    killed = time.monotonic()
    for thread in threads:
        thread.join(PUSH_TIMEOUT_S + 5)
    gw.start()
    recover_s = time.monotonic() - killed
    result = TrialResult(trial, kill_after, 0, 0, 0, 0, 0, recover_s)
    for log in logs:
        check_run(gw.base, log, result)
    return result


def check_run(base: str, log: RunLog, result: TrialResult) -> None:
    problems = result.problems
    name = f"{log.run_id} ({log.transport})"
    events = read_run(base, log.run_id)
    seqs = [e["seq"] for e in events]
    by_seq = {e["seq"]: e for e in events}
    result.acked += len(log.acked)
    if seqs != list(range(1, len(events) + 1)):
        result.duplicated += len(seqs) - len(set(seqs))
        problems.append(f"{name}: seqs are not 1…n: {seqs[:5]}…{seqs[-5:]}")
    lost = sum(by_seq.get(seq, {}).get("data") != data for seq, data in log.acked.items())
    if lost:
        result.lost += lost
        problems.append(f"{name}: {lost} of {len(log.acked)} acknowledged events lost")
    payloads = [json.dumps(e["data"], sort_keys=True) for e in events]
    if len(payloads) != len(set(payloads)):
        result.duplicated += len(payloads) - len(set(payloads))
        problems.append(f"{name}: a payload appears at two seqs")
    terminal = events[-1] if events else {}
    if terminal.get("kind") != "completion" or terminal.get("data") != RESTARTED:
        problems.append(f"{name}: last event is not the restart's terminal: {terminal}")
    reused = sum(by_seq.get(seen["seq"]) != seen for seen in log.seen)
    if reused:
        result.reused += reused
        problems.append(f"{name}: {reused} events a live client saw are not what it saw")
    # A client resumes from what it saw last (the live one), or from its last acknowledgement.
    for cursor in {log.seen[-1]["seq"] if log.seen else 0, max(log.acked, default=0)}:
        resumed = read_run(base, log.run_id, cursor)
        if not resumed or resumed != events[cursor:]:
            result.resume_errors += 1
            problems.append(f"{name}: resumed after {cursor}, got {len(resumed)} events")
