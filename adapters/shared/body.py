"""Bounded request-body reading and typed JSON decoding with messages that name the field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import msgspec
from starlette.requests import ClientDisconnect, Request

from ...contracts import json_input
from ...contracts.client_errors import describe_input_error
from .numbers import ascii_int
from .problem import HttpProblem

T = TypeVar("T")


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it passes ``limit`` bytes (never buffered past it)."""
    declared = ascii_int(request.headers.get("content-length"))
    if declared is not None and declared > limit:
        raise HttpProblem(413, f"request body is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in _chunks(request):
        size += len(chunk)
        if size > limit:
            raise HttpProblem(413, f"request body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _chunks(request: Request) -> AsyncIterator[bytes]:
    """The body as it arrives. A client gone before its end (or cut off by the server's body
    deadline, which has answered it 408) is an ordinary 400: nobody reads it, nothing to log."""
    try:
        async for chunk in request.stream():
            yield chunk
    except ClientDisconnect:
        raise HttpProblem(400, "the client left before its request body was complete") from None


def decode_json(
    raw: bytes,
    typ: type[T],
    *,
    status: int = 422,
    max_depth: int = json_input.DEFAULT_MAX_DEPTH,
) -> T:
    """Decode ``raw`` as ``typ``: 400 for malformed or too deeply nested JSON, ``status`` for a
    wrong shape."""
    if not raw.strip():
        raise HttpProblem(400, "request body is empty; expected a JSON object")
    try:
        value: T = json_input.decode(raw, typ, max_depth=max_depth)
    except msgspec.ValidationError as exc:
        # msgspec says "... - at `$.config.max_rounds`"; the "$." means nothing to users.
        raise HttpProblem(status, f"invalid request body: {describe_input_error(exc)}") from None
    except msgspec.DecodeError as exc:
        raise HttpProblem(400, f"malformed JSON: {describe_input_error(exc)}") from None
    return value


async def iter_lines(request: Request, max_line: int) -> AsyncIterator[tuple[int, bytes]]:
    """Yield ``(line_number, line)`` from a streamed NDJSON body as the chunks arrive.

    A line longer than ``max_line`` bytes is an error naming its number; blank lines are skipped.
    """
    buffer = bytearray()
    number = 0
    async for chunk in _chunks(request):
        buffer += chunk
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                break
            number += 1
            line = bytes(buffer[:cut])
            del buffer[: cut + 1]
            if len(line) > max_line:
                raise HttpProblem(
                    413, f"line {number} is longer than the limit of {max_line} bytes"
                )
            if line.strip():
                yield number, line
        if len(buffer) > max_line:
            raise HttpProblem(
                413, f"line {number + 1} is longer than the limit of {max_line} bytes"
            )
    if buffer.strip():
        yield number + 1, bytes(buffer)
