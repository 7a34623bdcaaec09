"""The process's stdin and stdout as the byte streams a stdio transport serves a client on.

stdout carries only protocol messages: :func:`reserve_stdout` moves the process's own stdout to
stderr, so a stray print or a library's warning cannot corrupt the stream.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from typing import Any, BinaryIO

from ...contracts.projector import ReadBytes, WriteBytes


def reserve_stdout() -> int:
    """Keep the real stdout for the protocol; everything else written to fd 1 goes to stderr.
    Returns the protocol's file descriptor."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_fd


async def stdio_streams(protocol_fd: int, limit: int) -> tuple[ReadBytes, WriteBytes]:
    """``read`` from stdin (buffering at most about ``limit`` bytes ahead of the reader) and
    ``write`` to ``protocol_fd``, which returns once the pipe took the bytes."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    source: Any = sys.stdin
    if not _is_pipe_like(sys.stdin.fileno()):
        # stdin is a regular file (``loopgate acp < requests.jsonl``) or /dev/null, which
        # asyncio cannot watch: a thread copies it into a pipe, whose reading end is watched.
        source = _pipe_from_thread(sys.stdin.fileno())
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    out = os.fdopen(protocol_fd, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    except ValueError:
        return reader.read, _file_writer(out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(data: bytes) -> None:
        writer.write(data)
        # Blocks while the pipe is full: the parent process reads at its own pace.
        await writer.drain()

    return reader.read, write


def _file_writer(out: BinaryIO) -> WriteBytes:
    """stdout redirected to a regular file: plain blocking writes (a file never stalls long)."""

    async def write(data: bytes) -> None:
        out.write(data)

    return write


def _is_pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    # Of the character devices, only a terminal can be watched: epoll refuses /dev/null.
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


def _pipe_from_thread(source: int) -> Any:
    """The reading end of a pipe a thread fills from file descriptor ``source``. The pipe is the
    back-pressure: the thread blocks while the server is not reading, so the file is never read
    into memory ahead of it."""
    read_fd, write_fd = os.pipe()

    def copy() -> None:
        # os.read, not sys.stdin.buffer: a daemon thread inside the buffered reader holds its
        # lock, and an interpreter exiting meanwhile aborts ("could not acquire lock for
        # <stdin> at interpreter shutdown", status -6).
        with os.fdopen(write_fd, "wb", buffering=0) as sink:
            try:
                while chunk := os.read(source, 65536):
                    sink.write(chunk)
            except OSError:
                pass  # the server stopped reading (a broken pipe): it is exiting

    threading.Thread(target=copy, daemon=True).start()
    return os.fdopen(read_fd, "rb", buffering=0)
