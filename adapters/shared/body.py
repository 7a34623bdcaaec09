"""Bounded request-body reading and typed JSON decoding with messages that name the field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeVar

import msgspec
from starlette.requests import Request

from adapters.shared.problem import HttpProblem

T = TypeVar("T")


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or 413 as soon as it passes ``limit`` bytes (never buffered past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpProblem(413, f"request body is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpProblem(413, f"request body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode_json(raw: bytes, typ: type[T], *, status: int = 422) -> T:
    """Decode ``raw`` as ``typ``: 400 for malformed JSON, ``status`` for a wrong shape."""
    if not raw.strip():
        raise HttpProblem(400, "request body is empty; expected a JSON object")
    try:
        return msgspec.json.decode(raw, type=typ)
    except msgspec.ValidationError as exc:
        raise HttpProblem(status, f"invalid request body: {_field_message(exc)}") from None
    except msgspec.DecodeError as exc:
        raise HttpProblem(400, f"malformed JSON: {exc}") from None


def _field_message(exc: msgspec.ValidationError) -> str:
    # msgspec says "... - at `$.config.max_rounds`"; the "$." prefix means nothing to users.
    return str(exc).replace("`$.", "`").replace("`$`", "`body`")


async def iter_lines(request: Request, max_line: int) -> AsyncIterator[tuple[int, bytes]]:
    """Yield ``(line_number, line)`` from a streamed NDJSON body as the chunks arrive.

    A line longer than ``max_line`` bytes is an error naming its number; blank lines are skipped.
    """
    buffer = bytearray()
    number = 0
    async for chunk in request.stream():
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
