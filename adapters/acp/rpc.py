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

from ...contracts import json_input
from ...contracts.projector import ReadBytes, WriteBytes
from ..shared.jsonrpc import ACP, Invalid, ParseFailure, batch_items, parse
from ..shared.jsonrpc import classify as check_item
from ..shared.lines import LineTooLong, read_lines
from ..shared.rpc_errors import INVALID_REQUEST, PARSE_ERROR, codes
from ..shared.ws import CLOSE_TIMEOUT_S, report_cut_off

log = logging.getLogger("loopgate.acp")

_encode = msgspec.json.Encoder().encode
_MESSAGES = {code: entry.message for code, entry in codes("acp").items()}


def error_response(request_id: Any, code: int, detail: str, data: Any = None) -> dict[str, Any]:
    """ACP's error answer: the code's message, then what was wrong (``Invalid params: …``)."""
    error: dict[str, Any] = {"code": code, "message": f"{_MESSAGES[code]}: {detail}"}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def classify(
    raw: bytes | str, max_depth: int = json_input.DEFAULT_MAX_DEPTH
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(message to dispatch, None) or (None, error response to send back)."""
    try:
        # Bounded before the SDK's pydantic models (and msgspec) recurse into it.
        message = parse(raw, max_depth)
    except ParseFailure as exc:
        return None, error_response(None, PARSE_ERROR, exc.detail)
    if isinstance(message, list):
        refused = batch_items(message, ACP)
        assert isinstance(refused, Invalid)
        return None, error_response(None, refused.code, refused.detail)
    kind = check_item(message, ACP)
    if isinstance(kind, Invalid):
        return None, error_response(kind.id, kind.code, kind.detail)
    return message, None


class PeerGone(ConnectionError):
    """The client can no longer be written to: it left, or stopped reading and was cut off.
    Expected, so never logged with a traceback (the transport logged the cut-off once)."""


def too_large(what: str, limit: int) -> dict[str, Any]:
    return error_response(None, INVALID_REQUEST, f"{what} {limit} bytes")


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
    """One JSON-RPC message per line over a pair of byte streams (the agent's stdin/stdout).

    ``write`` returns once the pipe took the bytes: a parent process that does not read holds
    the agent's answers, not its memory.
    """

    def __init__(
        self,
        read: ReadBytes,
        write: WriteBytes,
        max_line_bytes: int,
        *,
        max_depth: int = json_input.DEFAULT_MAX_DEPTH,
    ) -> None:
        self.max_depth = max_depth
        self.write = write
        self.max_line_bytes = max_line_bytes
        self._lines = read_lines(read, max_line_bytes)
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        data = _encode(message) + b"\n"
        async with self._lock:
            if self._closed:
                raise PeerGone("transport closed")
            try:
                await self.write(data)
            except (ConnectionError, OSError, RuntimeError):
                self._closed = True
                raise PeerGone("the client closed its input") from None

    async def receive(self) -> dict[str, Any] | None:
        async for line in self._lines:
            if isinstance(line, LineTooLong):
                await self._answer(too_large("message is longer than", self.max_line_bytes))
                continue
            if not line.strip():
                continue
            message = await self._accept(line)
            if message is not None:
                return message
        return None

    async def close(self) -> None:
        async with self._lock:
            self._closed = True


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
            frame: dict[str, Any] = {"type": "websocket.disconnect"}
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
