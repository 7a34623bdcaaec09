"""The trace worker process: frames in on stdin, spans out through the configured exporters.

Spawned by :class:`~gateway.telemetry.worker.WorkerSink`; its first frame is the
:class:`~gateway.telemetry.worker.WorkerSpec` (JSON), every later one a batch of messages
(:mod:`gateway.telemetry.wire`) for the same :class:`~gateway.telemetry.book.TraceBook` the
inline mode uses.

    python -m gateway.telemetry.worker_main
"""

from __future__ import annotations

import logging
import signal
import sys
from typing import IO

import msgspec
from opentelemetry.sdk.resources import Resource

from gateway.telemetry.book import TraceBook
from gateway.telemetry.spans import SpanWriter
from gateway.telemetry.wire import HEADER, MAX_FRAME_BYTES, FrameDecoder, FrameError
from gateway.telemetry.worker import WorkerSpec, build_processor

log = logging.getLogger("loopgate.telemetry")


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise FrameError(f"a frame of {size} bytes is over the limit of {MAX_FRAME_BYTES}")
    body = stream.read(size)
    return body if len(body) == size else None


def main() -> int:
    # The gateway ends this process by closing the pipe, after its last events.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="loopgate trace worker: %(message)s")
    stdin = sys.stdin.buffer
    try:
        first = _read_frame(stdin)
        if first is None:
            return 0
        spec = msgspec.json.decode(first, type=WorkerSpec)
    except (FrameError, msgspec.DecodeError):
        log.error("the gateway sent no valid worker spec; exiting")
        return 2
    processor = build_processor(spec)
    if processor is None:
        log.error("the worker spec names no exporter; exiting")
        return 2
    book = TraceBook(
        SpanWriter(processor, Resource.create({"service.name": spec.service_name})),
        content=spec.content,
        max_content_chars=spec.max_content_chars,
        max_open_spans=spec.max_open_spans,
        owns_processor=True,
    )
    decoder = FrameDecoder()
    try:
        while (body := _read_frame(stdin)) is not None:
            try:
                messages = decoder.decode(body)
            except FrameError:
                log.error("a frame could not be decoded; its messages are lost")
                continue
            for message in messages:
                book.put(message)
    except FrameError as exc:
        log.error("%s; no more spans are read", exc)
    finally:
        book.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
