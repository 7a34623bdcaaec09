"""One JSON-RPC connection over a pair of byte streams, one message per line (``loopgate rpc``).

A line longer than the message limit is skipped up to its newline and answered with -32006;
blank lines are ignored; the end of input ends the connection after its subscriptions.
"""

from __future__ import annotations

import anyio

from ...contracts.projector import ReadBytes, WriteBytes
from ..shared.lines import LineTooLong, read_lines
from .dispatch import Dispatcher, too_large
from .session import Session

__all__ = ["LineTooLong", "read_lines", "serve_lines"]


async def serve_lines(dispatcher: Dispatcher, read: ReadBytes, write: WriteBytes) -> None:
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
