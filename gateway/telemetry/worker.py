"""The trace worker: spans are built and exported in a process of their own.

Building a span costs ~10 µs of Python (the projector, the SDK's span objects, its batch
queue) and the gateway's hub runs on one core under one GIL: in-process, a span-dense run
(short tool calls) would lose a third of its events/s to tracing, and the OTLP exporter's
protobuf encoding competes for the same core. So the hub side (:class:`WorkerSink`) only
queues what happened — run starts, the events a span uses, subscription ends — and a task on
the hub's event loop prepares it (:mod:`gateway.telemetry.relay`) and writes it, in batches,
to this worker's stdin. The worker runs the same :class:`~gateway.telemetry.book.TraceBook`
as the inline mode, with the configured exporters.

Nothing here can stop a run: the queue is bounded (past it, the oldest messages give way and
the sink says so), a worker that dies or does not start is logged and ignored, and a pipe the
worker does not empty leaves messages queued, never the event loop waiting. The worker
ignores SIGINT/SIGTERM sent to the gateway's process group: it ends when the pipe closes,
after flushing what it was sent.

The worker process itself is :mod:`gateway.telemetry.worker_main`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from itertools import repeat
from operator import call
from typing import TYPE_CHECKING, Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

import anyio
import anyio.lowlevel
import msgspec
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)

from gateway.settings import REPO_ROOT
from gateway.telemetry.projector import SPAN_KINDS, TRACED_KINDS
from gateway.telemetry.relay import Relay
from gateway.telemetry.wire import HEADER, FrameEncoder

if TYPE_CHECKING:
    from gateway.hub import Run

log = logging.getLogger("loopgate.telemetry")

# Messages per frame: big enough to amortise the write, small enough to bound a frame.
MAX_BATCH = 4_096
# A dropped-messages warning at most this often.
WARN_EVERY_S = 10.0
# How often the queue is sent to the worker: often enough that what is sent is still in the
# core's cache, seldom enough that the flush task's own wake-ups cost nothing measurable. The
# worker's batch processor holds spans up to 5 s before exporting anyway.
FLUSH_INTERVAL_S = 0.05
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
    """The hub side of the worker: a bounded queue, drained by a task on the hub's event loop.

    A traced run's events reach the queue by the deque's own (C-level) append, filtered by
    kind in the hub (``run.observed``): no Python runs per event. Every ``flush_interval_s``
    the :meth:`pump` task takes what is queued, prepares it
    (:class:`~gateway.telemetry.relay.Relay`: first deltas, slimming),
    encodes it and writes it to the worker's pipe without blocking: a pipe the worker has not
    emptied yet leaves the rest queued for the next round. Everything happens on the loop's
    thread: no locks, and no thread that must win the GIL from a busy loop (the writer thread
    this replaces spent about a third of its time waking up and doing that). The queue is
    bounded: when the worker falls that far behind, the oldest messages give way, and the
    sink says so.
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
        # Messages lost to a dead worker or an unencodable payload, and the times the queue
        # was found at its bound (the oldest had given way: how many is not counted).
        self.dropped = 0
        self.overflows = 0
        self._queue: collections.deque[Any] = collections.deque(maxlen=max_queued)
        self._append = self._queue.append  # every traced run's observer: one bound method
        self._relay = Relay(spec.content)
        self._encoder = FrameEncoder()
        self._observed = TRACED_KINDS if spec.content else SPAN_KINDS
        # The part of the last frame the pipe did not take yet.
        self._unsent = memoryview(b"")
        self._dead = False
        self._closed = False
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
        stdin = self.process.stdin
        assert stdin is not None
        self._fd = stdin.fileno()
        _widen_pipe(self._fd)
        try:
            _write_all(self._fd, _spec_frame(spec))
            os.set_blocking(self._fd, False)
        except OSError:
            self._gone()

    def follow(self, run: Run) -> bool:
        if self._dead:
            return False
        self._relay.follow(run)
        run.observers.append(self._append)
        run.observed = self._observed
        return True

    def put(self, message: Any) -> None:
        if self._dead:
            self._drop(1)
        else:
            self._append(message)

    async def pump(self) -> None:
        """Flush every ``flush_interval_s``, a batch at a time (the loop stays responsive)."""
        while not (self._dead or self._closed):
            await anyio.sleep(self.flush_interval_s)
            while self.flush_batch():
                await anyio.lowlevel.checkpoint()

    def flush_batch(self) -> bool:
        """Send what the pipe takes of one batch; True if there is more to send now."""
        if self._dead:
            return False
        queue = self._queue
        batch: list[Any] = []
        try:
            if self._unsent:
                self._unsent = self._unsent[_write_some(self._fd, self._unsent) :]
                if self._unsent:
                    return False  # the pipe is full: the worker is behind
            if not queue:
                return False
            if len(queue) >= self.max_queued:
                self._overflowed()
            # popleft n times, in C.
            batch = list(map(call, repeat(queue.popleft, min(len(queue), MAX_BATCH))))
            frame = memoryview(self._encode(batch))
            self._unsent = frame[_write_some(self._fd, frame) :]
            return not self._unsent and bool(queue)
        except OSError:
            self._gone(len(batch))
            return False

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued, close the pipe and wait for the worker to flush its exports
        (each bounded by the export timeout plus a margin; then it is killed). Blocking."""
        if self._closed:
            return
        self._closed = True
        timeout = timeout_s if timeout_s is not None else self.spec.export_timeout_s + 5.0
        deadline = time.monotonic() + timeout
        queue = self._queue
        while (self._unsent or queue) and not self._dead:
            if self.flush_batch() or not self._unsent:
                continue
            # The pipe is full: wait for the worker to read, as long as the bound allows.
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning(
                    "the trace worker stopped reading; %d messages unsent", len(self._queue)
                )
                break
            select.select([], [self._fd], [], min(remaining, 0.5))
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("the trace worker did not finish in %.0f s; stopping it", timeout)
            self.process.kill()
            self.process.wait()
        if self.dropped:
            log.warning("telemetry dropped %d messages (worker gone or unencodable)", self.dropped)

    def _gone(self, in_flight: int = 0) -> None:
        if self._dead:
            return
        self._dead = True
        self._drop(in_flight + len(self._queue))
        self._queue.clear()
        self._unsent = memoryview(b"")
        log.error(
            "the trace worker is gone (exit code %s); spans are no longer exported",
            self.process.poll(),
        )

    def _encode(self, batch: list[Any]) -> bytes:
        """The frame of a prepared batch."""
        batch = self._relay.prepare(batch)
        encode = self._encoder.encode
        try:
            return encode(batch)
        except (TypeError, ValueError, OverflowError):
            # One unencodable payload (an integer beyond 64 bits, say) costs only itself.
            kept = []
            for message in batch:
                try:
                    encode([message])
                    kept.append(message)
                except (TypeError, ValueError, OverflowError):
                    self._drop(1)
            return encode(kept)

    def _overflowed(self) -> None:
        self.overflows += 1
        if self._may_warn():
            log.warning(
                "telemetry's queue reached its bound of %d messages (%d times so far): the "
                "oldest gave way and some runs' spans are incomplete; raise trace_queue_max "
                "or check that the trace worker keeps up",
                self.max_queued,
                self.overflows,
            )

    def _drop(self, n: int) -> None:
        if not n:
            return
        self.dropped += n
        if self._may_warn():
            log.warning(
                "telemetry is dropping messages (%d so far): %s",
                self.dropped,
                "the trace worker is gone" if self._dead else "a payload could not be encoded",
            )

    def _may_warn(self) -> bool:
        now = time.monotonic()
        if now - self._warned_at < WARN_EVERY_S:
            return False
        self._warned_at = now
        return True


def _widen_pipe(fd: int) -> None:
    """A 1 MiB pipe (Linux; 64 KiB by default) takes a whole batch in one write."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if set_size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, set_size, PIPE_BYTES)


def _write_some(fd: int, data: memoryview) -> int:
    """What a write took (0 when a non-blocking pipe is full); OSError when it is gone."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _spec_frame(spec: WorkerSpec) -> bytes:
    body = msgspec.json.encode(spec)
    return HEADER.pack(len(body)) + body
