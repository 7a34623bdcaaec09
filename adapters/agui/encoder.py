"""AG-UI over SSE: ``data: <json>\\n\\n`` per event.

LF only — the JS client splits the stream on "\\n\\n", so CRLF framing breaks every run. JSON never
contains a raw newline (msgspec escapes it), so one event is always one ``data:`` line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

MEDIA_TYPE = "text/event-stream"
# A comment line: ignored by the client, keeps idle proxies from dropping a quiet stream.
KEEPALIVE = b":\n\n"

_FRAME = b"data: %b\n\n"
_BETWEEN = b"\n\ndata: "


def sse_frames(events: Sequence[Any], encode: Callable[[Any], bytes]) -> bytes:
    """``events`` as SSE frames, each body produced by ``encode``."""
    if len(events) == 1:
        return _FRAME % encode(events[0])
    if not events:
        return b""
    return _FRAME % _BETWEEN.join(map(encode, events))


class SseEncoder:
    """Encodes events (Structs or builtins) into SSE bytes with one reusable msgspec Encoder."""

    __slots__ = ("encode",)

    def __init__(self) -> None:
        self.encode: Callable[[Any], bytes] = msgspec.json.Encoder().encode

    def frames(self, events: Sequence[Any]) -> bytes:
        """All events as consecutive SSE frames.

        A live stream renders each feed's output, which is usually one event: that case is one
        encode and one formatting copy. Several events are joined once, not framed one by one.
        """
        return sse_frames(events, self.encode)

    def frame(self, event: Any) -> bytes:
        return _FRAME % self.encode(event)

    def json(self, event: Any) -> bytes:
        """The bare JSON of one event (one WebSocket message per event)."""
        return self.encode(event)
