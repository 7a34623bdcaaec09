"""What the out-of-process plugs (HTTP, stdio) share: NDJSON lines and the request body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ...contracts import json_input
from ...contracts.client_errors import ClientError, client_message, describe_input_error
from ...contracts.loop import LoopFault, LoopRequest, RunContext

_encoder = msgspec.json.Encoder()


def encode_request(request: LoopRequest) -> bytes:
    return _encoder.encode(request)


def encode(value: Any) -> bytes:
    return _encoder.encode(value)


def decode(line: bytes, max_depth: int = json_input.DEFAULT_MAX_DEPTH) -> Any:
    """One JSON value; a ``ClientError`` (a ``ValueError``) with a short reason for malformed
    or too deeply nested input (the loop's fault, said in its run's completion)."""
    try:
        return json_input.decode(line, max_depth=max_depth)
    except json_input.JsonTooDeep as exc:
        raise ClientError(describe_input_error(exc)) from None
    except msgspec.DecodeError as exc:
        raise ClientError(f"malformed JSON ({describe_input_error(exc)})") from None


class Cut(bytes):
    """The first ``max_line_bytes`` of a line that was longer."""


class BoundedLines:
    """Bytes in, lines out, never holding more than ``max_line_bytes`` of a line.

    A longer line comes out as a :class:`Cut` as soon as it crosses the limit; the rest of it,
    up to its newline, is read and discarded, so a 100 MB line costs no more memory than a
    full one.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        partial = self._partial
        if self._skipping or len(partial) + len(chunk) > self.max_line_bytes:
            lines: list[bytes] = []

            def take(line: bytes) -> bool:
                lines.append(line)
                return True

            self.push(chunk, take)
            return lines
        # No line here can be too long: split at C speed (the way of every busy loop).
        if b"\n" not in chunk:
            partial += chunk
            return []
        lines = chunk.split(b"\n")
        if partial:
            lines[0] = bytes(partial) + lines[0]
            partial.clear()
        partial += lines.pop()
        return lines

    def push(self, chunk: bytes, take: Callable[[bytes], bool]) -> int:
        """Hand each line ``chunk`` completes to ``take``; once it answers False, the chunk's
        other complete lines are dropped unseen (counted, not split: no Python per line).
        Returns how many were dropped so."""
        partial, size, pos, dropped = self._partial, len(chunk), 0, 0
        while pos < size:
            newline = chunk.find(b"\n", pos)
            end = size if newline < 0 else newline
            line: bytes | None = None
            if self._skipping:
                pass
            elif end - pos > self.max_line_bytes - len(partial):
                partial += chunk[pos : pos + self.max_line_bytes - len(partial)]
                line = Cut(partial)
                partial.clear()
                self._skipping = True
            elif newline < 0:
                partial += chunk[pos:]
            elif partial:
                partial += chunk[pos:newline]
                line = bytes(partial)
                partial.clear()
            else:
                line = chunk[pos:newline]
            if newline < 0:
                if line is not None:
                    take(line)
                break
            self._skipping = False
            pos = newline + 1
            if line is not None and not take(line):
                last = chunk.rfind(b"\n", pos)
                if last >= 0:
                    dropped += chunk.count(b"\n", pos, last + 1)
                    pos = last + 1
        return dropped

    @property
    def pending(self) -> bytes:
        """The last line so far, when the stream ended without its newline."""
        return bytes(self._partial)


def line_too_long(what: str, max_line_bytes: int) -> LoopFault:
    return LoopFault(
        "loop_invalid_event",
        f"{what} sent a line longer than the limit of {max_line_bytes} bytes",
    )


def event_parts(value: Any, number: int) -> tuple[str, dict[str, Any]]:
    """``{"kind", "data"}`` from one decoded line; a fault saying what was wrong otherwise."""
    if not isinstance(value, dict):
        raise LoopFault(
            "loop_invalid_event", f"event {number} is not a JSON object ({type(value).__name__})"
        )
    kind, data = value.get("kind"), value.get("data", {})
    if not isinstance(kind, str):
        raise LoopFault("loop_invalid_event", f"event {number} has no string `kind`")
    if not isinstance(data, dict):
        raise LoopFault("loop_invalid_event", f"event {number}: `data` must be an object")
    return kind, data


async def relay_permission(
    ctx: RunContext, data: dict[str, Any], answer: Callable[[dict[str, Any]], Awaitable[Any]]
) -> None:
    """Ask the run's clients what a remote loop's ``permission_request`` asks, then hand the
    decision back to the loop with ``answer({request_id, tool_call_id, decision})``.

    A malformed request is a :class:`LoopFault`."""
    call, request_id, options = data.get("toolCall"), data.get("requestId"), data.get("options")
    try:
        decision = await ctx.ask_permission(
            call if isinstance(call, dict) else {},
            options=options if isinstance(options, list) else None,
            request_id=request_id if isinstance(request_id, str) else None,
        )
    except ValueError as exc:
        detail = client_message(exc) or "not a valid request"
        raise LoopFault("loop_invalid_event", f"permission_request: {detail}") from None
    await answer(
        {
            "request_id": request_id,
            "tool_call_id": call.get("id") if isinstance(call, dict) else None,
            "decision": decision,
        }
    )
