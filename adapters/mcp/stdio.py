"""MCP over a pair of byte streams, one JSON-RPC message per line (``loopgate mcp``).

The SDK's ``stdio_server`` owns the process's real stdin/stdout; ``loopgate mcp`` hands its
adapter streams instead (stdout reserved for the protocol by the command), so this is the
same bridge over them: lines in, each validated as a JSON-RPC message, the server's messages
out. Three things it adds: a line is bounded (``max_line_bytes``; a longer one is skipped and
answered -32600), a line that is not JSON or not a message is answered (-32700 / -32600, where
the SDK only logs it), and the end of the input is the end of the requests, not of their
answers: the calls in flight are answered first, so ``loopgate mcp < requests.jsonl`` prints
every answer (a client cancels what it no longer wants with ``notifications/cancelled``).
A request of the server's own (a ping) that the client can no longer answer, its input having
ended, fails at once instead of waiting for an answer that cannot come.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from ...contracts.limits import EndpointLimits
from ...contracts.projector import ReadBytes, WriteBytes
from ..shared.lines import LineTooLong, read_lines
from .messages import Refused, message_of
from .sessions import CANCELLED

log = logging.getLogger("loopgate.mcp")

RequestId = str | int


class InFlight:
    """The ids of the client's requests not answered yet."""

    def __init__(self) -> None:
        self.ids: set[RequestId] = set()
        self._idle = anyio.Event()
        self._idle.set()

    def add(self, request_id: RequestId) -> None:
        self.ids.add(request_id)
        if self._idle.is_set():
            self._idle = anyio.Event()

    def done(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self._idle.set()

    async def idle(self) -> None:
        await self._idle.wait()


INPUT_ENDED = "the client's input has ended; it can answer nothing more"


def error_line(code: int, message: str, request_id: RequestId | None = None) -> SessionMessage:
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def cancels(message: Any) -> Any:
    """The request a ``notifications/cancelled`` names; None for any other message."""
    if isinstance(message, types.JSONRPCNotification) and message.method == CANCELLED:
        return (message.params or {}).get("requestId")
    return None


async def serve_lines(
    server: Server[Any], read: ReadBytes, write: WriteBytes, limits: EndpointLimits
) -> None:
    """Serve one client until its input ends and every call it made is answered."""
    limit = limits.max_line_bytes
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    answers = server_writes.clone()  # the reader's own answers to lines it refuses
    in_flight = InFlight()
    asked: set[RequestId] = set()  # the server's requests the client has not answered
    ended = anyio.Event()

    async def unanswerable(request_id: RequestId) -> None:
        """Tell the server that its request will get no answer."""
        # Closed: the server has stopped reading, and waits for nothing.
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await to_server.send(error_line(types.CONNECTION_CLOSED, INPUT_ENDED, request_id))

    async def reader() -> None:
        async with to_server, answers:
            async for line in read_lines(read, limit):
                if isinstance(line, LineTooLong):
                    await answers.send(
                        error_line(
                            types.INVALID_REQUEST,
                            f"Invalid request: line is {line.size} bytes; the limit is {limit}",
                        )
                    )
                    continue
                if not line.strip():
                    continue
                message = message_of(line, limits.max_json_depth)
                if isinstance(message, Refused):
                    await answers.send(error_line(message.code, message.message, message.id))
                    continue
                if isinstance(message, types.JSONRPCRequest):
                    in_flight.add(message.id)
                elif (cancelled := cancels(message)) is not None:
                    # A cancelled request is never answered: nothing to wait for.
                    in_flight.done(cancelled)
                elif isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    asked.discard(message.id)
                await to_server.send(SessionMessage(message))
            ended.set()
            for request_id in list(asked):
                await unanswerable(request_id)
            await in_flight.idle()

    async def writer() -> None:
        async with from_server:
            async for item in from_server:
                message = item.message
                if isinstance(message, types.JSONRPCRequest):
                    if ended.is_set():
                        # Not from this loop: the server's reader may be waiting on it.
                        tg.start_soon(unanswerable, message.id)
                        continue
                    asked.add(message.id)
                elif (cancelled := cancels(message)) is not None:
                    asked.discard(cancelled)  # the server gave up on it (a ping timed out)
                data = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                try:
                    await write(data + b"\n")
                except Exception:
                    log.debug("the MCP client closed its end; stopping")
                    tg.cancel_scope.cancel()
                    return
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    in_flight.done(message.id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        tg.start_soon(reader)
        await server.run(server_reads, server_writes, server.create_initialization_options())
