"""Lines from a byte stream, each bounded: the framing of every stdio transport (one JSON-RPC
message a line)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ...contracts.projector import ReadBytes

READ_CHUNK = 1 << 16


class LineTooLong:
    """In place of a line over the limit, which was skipped up to its newline."""

    def __init__(self, size: int) -> None:
        self.size = size


async def read_lines(read: ReadBytes, limit: int) -> AsyncIterator[bytes | LineTooLong]:
    """Lines without their terminator; ``LineTooLong`` in place of one over ``limit`` bytes
    (never buffered past the limit). The last line may lack its newline."""
    buffer = bytearray()
    skipping = 0  # bytes of an oversized line dropped so far; 0 = not skipping
    while True:
        chunk = await read(READ_CHUNK)
        if not chunk:
            break
        buffer += chunk
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                break
            if skipping:
                yield LineTooLong(skipping + cut)
                skipping = 0
            elif cut > limit:
                yield LineTooLong(cut)
            else:
                yield bytes(buffer[:cut])
            del buffer[: cut + 1]
        if len(buffer) > limit:
            skipping += len(buffer)
            buffer.clear()
    if skipping:
        yield LineTooLong(skipping + len(buffer))
    elif buffer.strip():
        yield bytes(buffer)
