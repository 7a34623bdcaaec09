"""JSON-RPC framing for ACP: NDJSON over byte streams (stdio), one message per WebSocket frame.

The official SDK's ``acp.connection.Connection`` does the JSON-RPC bookkeeping (ids, pending
requests, one task per incoming request) over any object with ``send``/``receive``/``close``.
These transports add what the SDK's own framing skips: an unparseable line or frame gets a
-32700 answer and a message that is not a JSON-RPC request gets -32600 (the SDK logs and
drops both), and every line and frame is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import anyio
import msgspec

from adapters.shared.ws import CLOSE_TIMEOUT_S, report_cut_off
from contracts import json_input
from contracts.client_errors import describe_input_error

log = logging.getLogger("loopgate.acp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SERVER_BUSY = -32000

_encode = msgspec.json.Encoder().encode


def error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def classify(
    raw: bytes | str, max_depth: int = json_input.DEFAULT_MAX_DEPTH
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(message to dispatch, None) or (None, error response to send back)."""
    try:
        # Bounded before the SDK's pydantic models (and msgspec) recurse into it.
        message = json_input.decode(raw, max_depth=max_depth)
    except json_input.JsonTooDeep as exc:
        return None, error_response(None, PARSE_ERROR, f"Parse error: {describe_input_error(exc)}")
    except msgspec.DecodeError:
        return None, error_response(None, PARSE_ERROR, "Parse error: the message is not JSON")
    if isinstance(message, list):
        return None, error_response(
            None, INVALID_REQUEST, "Invalid request: batches are not supported by ACP"
        )
    if not isinstance(message, dict):
        return None, error_response(
            None, INVALID_REQUEST, "Invalid request: a message must be a JSON object"
        )
    request_id = message.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, int | str)
    ):
        return None, error_response(
            None, INVALID_REQUEST, "Invalid request: id must be a number or a string"
        )
    if message.get("jsonrpc") != "2.0":
        return None, error_response(
            request_id, INVALID_REQUEST, 'Invalid request: jsonrpc must be "2.0"'
        )
    method = message.get("method")
    if "method" in message:
        if not isinstance(method, str) or not method:
            return None, error_response(
                request_id, INVALID_REQUEST, "Invalid request: method must be a non-empty string"
            )
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return None, error_response(
                request_id, -32602, "Invalid params: params must be an object"
            )
        return message, None
    if "id" in message and ("result" in message or "error" in message):
        return message, None  # a response to one of our requests
    return None, error_response(
        request_id, INVALID_REQUEST, "Invalid request: neither a request nor a response"
    )


class PeerGone(ConnectionError):
    """The client can no longer be written to: it left, or stopped reading and was cut off.
    Expected, so never logged with a traceback (the transport logged the cut-off once)."""


def too_large(what: str, limit: int) -> dict[str, Any]:
    return error_response(None, INVALID_REQUEST, f"Invalid request: {what} {limit} bytes")


class _Answering:
    """What both transports do with a raw message: pass it on, or answer its error here."""

    max_depth = json_input.DEFAULT_MAX_DEPTH

    async def send(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _answer(self, error: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self.send(error)

    async def _accept(self, raw: bytes | str) -> dict[str, Any] | None:
        message, error = classify(raw, self.max_depth)
        if error is not None:
            await self._answer(error)
        return message


class NdjsonTransport(_Answering):
    """One JSON-RPC message per line over asyncio byte streams (the agent's stdin/stdout).

    ``reader`` must have been created with ``limit`` > ``max_line_bytes`` so that an
    over-long line is noticed before it is buffered whole.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_line_bytes: int,
        *,
        max_depth: int = json_input.DEFAULT_MAX_DEPTH,
    ) -> None:
        self.max_depth = max_depth
        self.reader = reader
        self.writer = writer
        self.max_line_bytes = max_line_bytes
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        data = _encode(message) + b"\n"
        async with self._lock:
            if self._closed:
                raise PeerGone("transport closed")
            try:
                self.writer.write(data)
                # Blocks while the pipe is full: the parent process reads at its own pace.
                await self.writer.drain()
            except (ConnectionError, OSError, RuntimeError):
                self._closed = True
                raise PeerGone("the client closed its input") from None

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            message = await self._accept(line)
            if message is not None:
                return message

    async def _line(self) -> bytes | None:
        overran = False
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError:
            await self._discard_line()
            overran, line = True, b""
        if overran or len(line) > self.max_line_bytes:
            await self._answer(too_large("message is longer than", self.max_line_bytes))
            return b""
        return line

    async def _discard_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
        with contextlib.suppress(OSError, RuntimeError):
            self.writer.close()


class WebSocketTransport(_Answering):
    """One JSON-RPC message per text frame over a Starlette WebSocket (accepted already)."""

    def __init__(
        self,
        websocket: Any,
        max_frame_bytes: int,
        send_timeout_s: float,
        *,
        max_depth: int = json_input.DEFAULT_MAX_DEPTH,
    ) -> None:
        self.max_depth = max_depth
        self.websocket = websocket
        self.max_frame_bytes = max_frame_bytes
        self.send_timeout_s = send_timeout_s
        self._lock = asyncio.Lock()
        self._closed = False
        self._cut_off = False
        self._close_sent = False
        self._receiving: anyio.CancelScope | None = None

    async def send(self, message: dict[str, Any]) -> None:
        text = _encode(message).decode()
        async with self._lock:
            if self._closed:
                raise PeerGone("transport closed")
            # A client that stops reading must not hold the agent, or its requests, forever.
            with anyio.move_on_after(self.send_timeout_s) as timer:
                try:
                    await self.websocket.send_text(text)
                except Exception:
                    self._shut()
                    raise PeerGone("the WebSocket client went away") from None
            if timer.cancelled_caught:
                report_cut_off(log, "ACP", self.websocket, self.send_timeout_s)
                self._cut_off = True
                self._shut()
                raise PeerGone("the WebSocket client stopped reading")

    def _shut(self) -> None:
        """No more sends; a reader waiting for the next frame returns None at once."""
        self._closed = True
        if self._receiving is not None:
            self._receiving.cancel()

    async def receive(self) -> dict[str, Any] | None:
        while not self._closed:
            with anyio.CancelScope() as scope:
                self._receiving = scope
                try:
                    frame = await self.websocket.receive()
                except Exception:
                    return None
                finally:
                    self._receiving = None
            if scope.cancelled_caught or frame["type"] == "websocket.disconnect":
                return None
            raw = frame.get("text")
            if raw is None:
                raw = frame.get("bytes") or b""
            if len(raw) > self.max_frame_bytes:
                await self._answer(too_large("frame is larger than", self.max_frame_bytes))
                continue
            message = await self._accept(raw)
            if message is not None:
                return message
        return None

    async def close(self) -> None:
        async with self._lock:
            already = self._close_sent or (self._closed and not self._cut_off)
            self._close_sent = True
            self._shut()
        if already:
            return
        code, reason = (1008, "client stopped reading") if self._cut_off else (1000, "")
        # Bounded: the close frame waits behind whatever a non-reading client left unread.
        with anyio.move_on_after(CLOSE_TIMEOUT_S):
            try:
                await self.websocket.close(code, reason)
            except Exception:
                log.debug("closing an already closed WebSocket")
