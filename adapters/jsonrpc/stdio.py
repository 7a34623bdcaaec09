"""One JSON-RPC connection over a pair of byte streams, one message per line (``loopgate rpc``).

A line longer than the message limit is skipped up to its newline and answered with -32006;
blank lines are ignored; the end of input ends the connection after its subscriptions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio

from adapters.jsonrpc.dispatch import Dispatcher, too_large
from adapters.jsonrpc.session import Session

READ_CHUNK = 1 << 16
Read = Callable[[int], Awaitable[bytes]]
Write = Callable[[bytes], Awaitable[None]]


class LineTooLong:
    def __init__(self, size: int) -> None:
        self.size = size


async def read_lines(read: Read, limit: int) -> AsyncIterator[bytes | LineTooLong]:
    """Lines without their terminator; ``LineTooLong`` in place of one over ``limit`` bytes
    (never buffered past the limit)."""
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


async def serve_lines(dispatcher: Dispatcher, read: Read, write: Write) -> None:
    """Serve one session until the input ends, then end its subscriptions."""
    limit = dispatcher.limits.max_message_bytes

    async def send(messages: list[bytes]) -> None:
        await write(b"".join(m + b"\n" for m in messages))

    async with anyio.create_task_group() as tg:
        session = Session(dispatcher, send, tg)
        async for line in read_lines(read, limit):
            if isinstance(line, LineTooLong):
                await session.send([too_large(f"line is {line.size} bytes; the limit is {limit}")])
            elif line.strip():
                await session.receive(line)
        tg.cancel_scope.cancel()
