"""A stdio loop's stderr, relayed to the gateway's within bounds (docs/loops.md).

The child's lines go out as it wrote them, but each is cut at a maximum length (and marked)
and the whole is rate-limited by a token bucket; what does not fit is dropped, never queued,
and the log says how much: once per interval while it happens, and in all when the child's
stderr closes. The pipe is always drained, so a child flooding its stderr is never stalled by
the gateway (only by its own writes), and what is held is at most one line. The writing is a
thread's: a gateway stderr that is read slowly, or not at all, blocks it and not the event
loop (what cannot wait is dropped as well).
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Callable

import anyio
import anyio.abc
import msgspec

from .wire import BoundedLines, Cut

log = logging.getLogger("loopgate.loop.stdio")

READ_CHUNK = 1 << 16


class StderrBounds(msgspec.Struct, frozen=True, kw_only=True):
    """The settings' ``loop_stderr_*``."""

    max_line_bytes: int
    bytes_per_s: int
    burst_bytes: int
    report_every_s: float


def cut_marker(bounds: StderrBounds) -> bytes:
    return f" [cut: line longer than {bounds.max_line_bytes} bytes]".encode()


def capacity(bounds: StderrBounds) -> int:
    """The burst, but at least a line at its longest, marked: that always fits a full bucket."""
    return max(bounds.burst_bytes, bounds.max_line_bytes + len(cut_marker(bounds)) + 1)


class TokenBucket:
    """``rate`` bytes a second, saved up to ``capacity``; starts full."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self._at = now

    def take(self, size: int, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self._at) * self.rate)
        self._at = now
        if size > self.tokens:
            return False
        self.tokens -= size
        return True


class Tally(msgspec.Struct):
    received: int = 0  # bytes read from the child
    relayed: int = 0  # of those, written out
    dropped_lines: int = 0  # lines left out whole, over the rate
    cut_lines: int = 0  # lines cut at max_line_bytes

    def since(self, before: Tally) -> Tally:
        fields = msgspec.structs.asdict(self)
        return Tally(**{k: v - getattr(before, k) for k, v in fields.items()})

    @property
    def dropped(self) -> int:
        return self.received - self.relayed

    def describe(self) -> str:
        return (
            f"dropped {self.dropped:,} of {self.received:,} bytes ({self.dropped_lines:,} lines "
            f"over the rate, {self.cut_lines:,} cut to length)"
        )


class StderrRelay:
    """Feeds the child's stderr bytes through the bounds to ``write`` (sans-IO but for it)."""

    def __init__(
        self,
        bounds: StderrBounds,
        write: Callable[[bytes], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bounds = bounds
        self.write = write
        self.clock = clock
        self.marker = cut_marker(bounds)
        self.bucket = TokenBucket(bounds.bytes_per_s, capacity(bounds), clock())
        self.lines = BoundedLines(bounds.max_line_bytes)
        self.tally = Tally()
        self._reported = Tally()
        self._reported_at = clock()

    def feed(self, chunk: bytes) -> None:
        self.tally.received += len(chunk)
        # Past a line the bucket cannot take, the chunk's other lines are dropped without
        # being split: a flood costs the gateway little more than reading it.
        dropped = self.lines.push(chunk, self._take)  # before the sum: _take adds to it
        self.tally.dropped_lines += dropped

    def _take(self, line: bytes) -> bool:
        if not isinstance(line, Cut):
            return self._relay(line, b"\n", len(line) + 1)
        self.tally.cut_lines += 1
        return self._relay(line, self.marker + b"\n", len(line))

    def _relay(self, data: bytes, end: bytes, size: int) -> bool:
        """Write ``data + end`` if the bucket has room and the writer takes it; ``size``: the
        child's bytes in it."""
        if not self.bucket.take(len(data) + len(end), self.clock()):
            self.tally.dropped_lines += 1
            return False
        if not self.write(data + end):
            self.tally.dropped_lines += 1
            return False
        self.tally.relayed += size
        return True

    def close(self) -> None:
        """The child's stderr ended: its last line, if unfinished, and the final account."""
        if self.lines.pending:
            self._relay(self.lines.pending, b"\n", len(self.lines.pending))
        if self.tally.dropped:
            log.warning("the loop process's stderr closed: in all, %s", self.tally.describe())

    def report_in(self) -> float:
        """Seconds until the drops since the last report are due in the log (inf: none)."""
        if self.tally.dropped == self._reported.dropped:
            return math.inf
        return max(0.0, self._reported_at + self.bounds.report_every_s - self.clock())

    def report(self) -> None:
        if self.report_in() > 0:
            return
        now = self.clock()
        recent = self.tally.since(self._reported)
        log.warning(
            "the loop process's stderr, the last %.0f s: %s; bounds: %d bytes a second, lines "
            "of %d bytes (loop_stderr_bytes_per_s, loop_stderr_max_line_bytes)",
            now - self._reported_at,
            recent.describe(),
            self.bounds.bytes_per_s,
            self.bounds.max_line_bytes,
        )
        self._reported = msgspec.structs.replace(self.tally)
        self._reported_at = now


async def relay_stderr(
    stream: anyio.abc.ByteReceiveStream, bounds: StderrBounds, write: Callable[[bytes], bool]
) -> None:
    """Drain ``stream`` until it ends (or this is cancelled), relaying within ``bounds``."""
    relay = StderrRelay(bounds, write)
    try:
        while True:
            with anyio.move_on_after(relay.report_in()):
                try:
                    relay.feed(await stream.receive(READ_CHUNK))
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
            relay.report()
    finally:
        relay.close()


def write_stderr(data: bytes) -> None:
    # Through sys.stderr (not its file descriptor) so the lines interleave with the log's.
    sys.stderr.write(data.decode("utf-8", "replace"))
    sys.stderr.flush()


class StderrWriter:
    """Writes to the gateway's stderr from a thread of its own, so that a stderr nobody reads
    blocks that thread and never the event loop. At most ``limit`` bytes wait (and as many
    are being written); :meth:`offer` refuses what would go beyond."""

    def __init__(self, limit: int, sink: Callable[[bytes], None] = write_stderr) -> None:
        self.limit = limit
        self._sink = sink
        self._waiting: list[bytes] = []
        self._size = 0
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="loopgate-loop-stderr", daemon=True)
        self._thread.start()

    def offer(self, data: bytes) -> bool:
        with self._changed:
            if self._closed or self._size + len(data) > self.limit:
                return False
            self._waiting.append(data)
            self._size += len(data)
            self._changed.notify()
        return True

    async def aclose(self, timeout_s: float) -> None:
        """Writes what waits, for at most ``timeout_s`` (a stuck stderr keeps the thread)."""
        with self._changed:
            self._closed = True
            self._changed.notify()
        await anyio.to_thread.run_sync(self._thread.join, timeout_s, abandon_on_cancel=True)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    return
                data = b"".join(self._waiting)
                self._waiting.clear()
                self._size = 0
            self._sink(data)
