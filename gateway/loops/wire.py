"""What the out-of-process plugs (HTTP, stdio) share: NDJSON lines and the request body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from loopgate.contracts import json_input
from loopgate.contracts.client_errors import ClientError, client_message, describe_input_error
from loopgate.contracts.loop import LoopFault, LoopRequest, RunContext

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


class LineSplitter:
    """Bytes in, complete lines out; a line longer than ``max_line_bytes`` is a fault."""

    def __init__(self, max_line_bytes: int, what: str) -> None:
        self.max_line_bytes = max_line_bytes
        self.what = what
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        partial = self._partial
        if b"\n" not in chunk:
            partial += chunk
            self._check(len(partial))
            return []
        lines = chunk.split(b"\n")
        if partial:
            lines[0] = bytes(partial) + lines[0]
            partial.clear()
        rest = lines.pop()
        if rest:
            partial += rest
            self._check(len(partial))
        for line in lines:
            self._check(len(line))
        return lines

    @property
    def pending(self) -> bytes:
        return bytes(self._partial)

    def _check(self, size: int) -> None:
        if size > self.max_line_bytes:
            raise LoopFault(
                "loop_invalid_event",
                f"{self.what} sent a line longer than the limit of {self.max_line_bytes} bytes",
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
