"""JSON from outside the process, decoded with its nesting bounded before any decoder sees it.

msgspec's decoder, ``msgspec.convert``, ``to_builtins``, the encoder, the ``json`` module and
pydantic all recurse once per nesting level, against the interpreter's recursion limit: a 2 KB
document of 1,000 ``[`` raises ``RecursionError`` inside whichever of them meets it first, which
no endpoint expects. A document nested deeper than ``max_depth`` is refused here instead, with
:class:`JsonTooDeep` — a ``msgspec.DecodeError`` (and so a ``ValueError``), which every decoding
site already answers with its protocol's parse error. Payloads of real loops and clients are a
few levels deep; the default leaves room for deep JSON Schemas in tool definitions.
"""

from __future__ import annotations

import re
from array import array
from itertools import accumulate
from typing import Any

import msgspec

DEFAULT_MAX_DEPTH = 128

# JSON strings may hold brackets; they are cut out before counting. Unrolled so that a long
# string costs one regex step per run of plain characters, not one per character.
_STRING_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRING_TEXT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Openers → +1, closers → -1 (0xff as a signed byte): the running sum is the depth.
_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")

_any_decoder = msgspec.json.Decoder()


class JsonTooDeep(msgspec.DecodeError):
    """The document nests arrays and objects deeper than the bound."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(f"JSON is nested deeper than {max_depth} levels")
        self.max_depth = max_depth


def nesting_depth(raw: bytes | str) -> int:
    """The deepest nesting of arrays and objects in a JSON document (0 for a scalar).

    Exact for well-formed JSON; for malformed input it may be off, which only changes which of
    two errors the input gets."""
    if isinstance(raw, str):
        raw = _STRING_TEXT.sub("", raw).encode("ascii", "ignore")
    else:
        raw = _STRING_BYTES.sub(b"", raw)
    signs = raw.translate(None, _NOT_BRACKETS).translate(_SIGNS)
    return max(accumulate(array("b", signs)), default=0)


def check_depth(raw: bytes | str, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """:class:`JsonTooDeep` if ``raw`` nests deeper than ``max_depth``.

    Most documents have fewer brackets than the bound, which two C-speed counts prove; only
    the others are scanned (about as fast as decoding them)."""
    opens = (
        raw.count("[") + raw.count("{")
        if isinstance(raw, str)
        else (raw.count(b"[") + raw.count(b"{"))
    )
    if opens > max_depth and nesting_depth(raw) > max_depth:
        raise JsonTooDeep(max_depth)


def decode(
    raw: bytes | str,
    type: Any = Any,
    *,
    decoder: msgspec.json.Decoder[Any] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """``raw`` decoded as ``type`` (or by ``decoder``), if it nests no deeper than ``max_depth``.

    Raises ``msgspec.DecodeError``: :class:`JsonTooDeep` for nesting, ``ValidationError`` for a
    wrong shape."""
    check_depth(raw, max_depth)
    try:
        if decoder is not None:
            return decoder.decode(raw)
        if type is Any:
            return _any_decoder.decode(raw)
        return msgspec.json.decode(raw, type=type)
    except RecursionError:
        # Only when the caller's own stack is already deep; the bound above is the rule.
        raise JsonTooDeep(max_depth) from None
