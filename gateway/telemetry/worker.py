"""The trace worker: spans are built and exported in a process of their own.

Building a span costs ~10 µs of Python (the projector, the SDK's span objects, its batch
queue) and the gateway's hub runs on one core under one GIL: in-process, a span-dense run
(short tool calls) would lose a third of its events/s to tracing, and the OTLP exporter's
protobuf encoding competes for the same core. So the hub side (:class:`WorkerSink`) only
queues what happened — run starts, events, subscription ends; deltas only when one changes a
span — and a thread writes them, in batches, to this worker's stdin. The worker runs the same
:class:`~gateway.telemetry.book.TraceBook` as the inline mode, with the configured exporters.

Nothing here can stop a run: the queue is bounded (past it, messages are dropped and
counted), a worker that dies or does not start is logged and ignored, and a full pipe blocks
only the writer thread. The worker ignores SIGINT/SIGTERM sent to the gateway's process
group: it ends when the pipe closes, after flushing what it was sent.

The worker process itself is :mod:`gateway.telemetry.worker_main`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

import msgspec
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)

from contracts.envelope import Envelope
from gateway.settings import REPO_ROOT
from gateway.telemetry.projector import CONTENT_FIELDS
from gateway.telemetry.wire import HEADER, FrameEncoder

log = logging.getLogger("loopgate.telemetry")

# Messages per frame: big enough to amortise the write, small enough to bound a frame.
MAX_BATCH = 4_096
# With content capture off, content fields longer than this (or not text: their size is
# unknown until encoded) are left out of what the worker is sent: it would only ignore them.
SLIM_ABOVE_CHARS = 1_024
# A dropped-messages warning at most this often.
WARN_EVERY_S = 10.0
# How long the writer thread sleeps between drains. Every wake-up costs the gateway's process
# CPU (the thread must win the GIL from the busy event loop), so it sleeps long: the worker's
# batch processor holds spans for up to 5 s before exporting anyway, and an idle gateway backs
# off further. A queue filling up wakes it early (at a quarter of its bound).
FLUSH_INTERVAL_S = 1.0
IDLE_INTERVAL_S = 4.0
PIPE_BYTES = 1 << 20


class WorkerSpec(msgspec.Struct, kw_only=True, frozen=True):
    """How the worker exports: sent as its first frame (JSON), so nothing is on its argv."""

    otlp_endpoint: str | None = None
    console: bool = False
    # A batch processor into an exporter that drops everything: what benchmarks measure.
    discard: bool = False
    export_timeout_s: float = 5.0
    service_name: str = "loopgate"
    content: bool = False
    max_content_chars: int = 16_384
    max_open_spans: int = 1_024


class DiscardExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def build_processor(spec: WorkerSpec) -> SpanProcessor | None:
    """The span processors a spec asks for (batched: exporters block on I/O), or None."""
    timeout_ms = spec.export_timeout_s * 1000
    exporters: list[SpanExporter] = []
    if spec.otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporters.append(
            OTLPSpanExporter(endpoint=spec.otlp_endpoint, timeout=spec.export_timeout_s)
        )
    if spec.console:
        exporters.append(ConsoleSpanExporter(out=sys.stderr))
    if spec.discard:
        exporters.append(DiscardExporter())
    # When the collector is down the bounded queues drop spans instead of growing.
    processors = [BatchSpanProcessor(e, export_timeout_millis=timeout_ms) for e in exporters]
    if len(processors) <= 1:
        return processors[0] if processors else None
    multi = SynchronousMultiSpanProcessor()
    for p in processors:
        multi.add_span_processor(p)
    return multi


class WorkerSink:
    """The hub side of the worker: a bounded in-memory queue and a writer thread.

    ``put`` is the hub's hot path: one append, no I/O, no lock held across anything.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        max_queued: int = 100_000,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        python: str = sys.executable,
    ) -> None:
        self.spec = spec
        self.max_queued = max_queued
        self.flush_interval_s = flush_interval_s
        self.dropped = 0
        self._wake_above = max(max_queued // 4, 1)
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._closing = False
        self._dead = False
        self._warned_at = 0.0
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self.process = subprocess.Popen(
            # -P: the worker imports this checkout's code (PYTHONPATH), never a `gateway`
            # package that happens to sit in the current directory.
            [python, "-P", "-m", "gateway.telemetry.worker_main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
            # Out of the gateway's process group: Ctrl-C must not kill it before the
            # gateway's last events (and its own queue) are flushed.
            start_new_session=True,
        )
        _widen_pipe(self.process.stdin)
        self._thread = threading.Thread(target=self._pump, name="loopgate-trace-relay", daemon=True)
        self._thread.start()

    def put(self, message: Any) -> None:
        queue = self._queue
        queued = len(queue)
        if queued < self._wake_above:
            queue.append(message)
        elif queued < self.max_queued and not self._dead:
            queue.append(message)
            self._wake.set()
        else:
            self._drop(1)

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued, close the pipe and wait for the worker to flush its exports
        (bounded: the export timeout plus a margin; then it is killed)."""
        timeout = timeout_s if timeout_s is not None else self.spec.export_timeout_s + 5.0
        self._closing = True
        self._wake.set()
        self._thread.join(timeout)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("the trace worker did not finish in %.0f s; stopping it", timeout)
            self.process.kill()
            self.process.wait()
        if self.dropped:
            log.warning("telemetry dropped %d messages (queue full or worker gone)", self.dropped)

    def _pump(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        encoder = FrameEncoder()
        try:
            _write(stdin, _spec_frame(self.spec))
            interval = self.flush_interval_s
            while True:
                self._wake.wait(interval)
                self._wake.clear()
                closing = self._closing
                queue = self._queue
                # Nothing to send: sleep longer next time, up to IDLE_INTERVAL_S.
                interval = (
                    self.flush_interval_s
                    if queue
                    else min(interval * 2, max(IDLE_INTERVAL_S, self.flush_interval_s))
                )
                while queue:
                    batch = [queue.popleft() for _ in range(min(len(queue), MAX_BATCH))]
                    _write(stdin, self._encode(encoder, batch))
                if closing:
                    break
        except (BrokenPipeError, OSError, ValueError):
            self._wake_above = 0  # every put now takes the checked path, and is dropped
            self._dead = True
            self._drop(len(self._queue))
            self._queue.clear()
            log.error(
                "the trace worker is gone (exit code %s); spans are no longer exported",
                self.process.poll(),
            )
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _encode(self, encoder: FrameEncoder, batch: list[Any]) -> bytes:
        if not self.spec.content:
            kinds = CONTENT_FIELDS
            batch = [_slim(m) if type(m) is Envelope and m.kind in kinds else m for m in batch]
        return self._encode_each(encoder, batch)[0]

    def _encode_each(self, encoder: FrameEncoder, batch: list[Any]) -> tuple[bytes, list[Any]]:
        """The frame, and the messages in it."""
        try:
            return encoder.encode(batch), batch
        except (TypeError, ValueError, OverflowError):
            # One unencodable payload (an integer beyond 64 bits, say) costs only itself.
            kept = []
            for message in batch:
                try:
                    encoder.encode([message])
                    kept.append(message)
                except (TypeError, ValueError, OverflowError):
                    self._drop(1)
            return encoder.encode(kept), kept

    def _drop(self, n: int) -> None:
        if not n:
            return
        self.dropped += n
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "telemetry is dropping messages (%d so far): the trace worker is %s",
                self.dropped,
                "gone" if self._dead else f"more than {self.max_queued} messages behind",
            )


def _slim(env: Envelope) -> Envelope:
    """The envelope without big content fields (a tool result can be megabytes: ~2 ms to
    encode and pipe, to be ignored). Short text stays: copying costs more than sending it."""
    data = env.data
    slim = None
    for key in CONTENT_FIELDS[env.kind]:
        value = data.get(key)
        if value is not None and (type(value) is not str or len(value) > SLIM_ABOVE_CHARS):
            if slim is None:
                slim = dict(data)
            del slim[key]
    return env if slim is None else Envelope(env.run_id, env.seq, env.ts, env.kind, slim)


def _widen_pipe(stream: IO[bytes] | None) -> None:
    """A 1 MiB pipe (Linux; 64 KiB by default) takes a whole batch in fewer blocking writes."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if stream is not None and set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(stream.fileno(), set_size, PIPE_BYTES)


def _spec_frame(spec: WorkerSpec) -> bytes:
    body = msgspec.json.encode(spec)
    return HEADER.pack(len(body)) + body


def _write(stream: IO[bytes], data: bytes) -> None:
    stream.write(data)
    stream.flush()
