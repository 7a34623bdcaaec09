"""The one SSE framer: native SSE and AG-UI over SSE.

LF framing (the AG-UI JS client splits the stream on "\\n\\n": CRLF would break every run), one
``data:`` line per event (what is framed is msgspec JSON, which never holds a raw newline), and
one keep-alive comment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...contracts.encoded import EncodedEnvelopes
from ...contracts.envelope import Envelope, encode_envelope

MEDIA_TYPE = "text/event-stream; charset=utf-8"
HEADERS = {
    "cache-control": "no-cache",
    # nginx buffers ~16 KB of a proxied response unless told not to.
    "x-accel-buffering": "no",
}
# A comment line and no blank line after it: a blank line dispatches an event in parsers that
# keep the last event id (httpx-sse hands out an empty event per keep-alive then). The WHATWG
# parser ignores the comment either way, and the AG-UI JS client, which splits on "\n\n" and
# reads only `data:` lines, finds it in front of the next event's block and skips it.
KEEPALIVE = b": keep-alive\n"

_DATA = b"data: %b\n\n"
_BETWEEN = b"\n\ndata: "
# No ``event:`` line: every envelope is a ``message`` event, so an EventSource's ``onmessage``
# gets every kind, unknown ones too, and an ``error`` LoopEvent never fires ``onerror`` (a named
# event "error" would: it shares the name of the connection-error event). A client reads the
# kind from the envelope.
_EVENT = b"id: %d\ndata: %b\n\n"


def data_frames(messages: Sequence[Any], encode: Callable[[Any], bytes]) -> bytes:
    """One ``data:`` event per message, its JSON made by ``encode``.

    A live stream frames each feed's output, which is usually one message: that case is one
    encode and one formatting copy; several are joined once, not framed one by one.
    """
    if len(messages) == 1:
        return _DATA % encode(messages[0])
    if not messages:
        return b""
    return _DATA % _BETWEEN.join(map(encode, messages))


def envelope_frames(envelopes: Sequence[Envelope] | EncodedEnvelopes) -> bytes:
    """One unnamed event per envelope: ``id`` = seq, ``data`` = the envelope.

    Envelopes the hub keeps encoded (a finished run's) are framed from those bytes: the same
    frames, with nothing decoded or encoded again, however many clients read them."""
    if isinstance(envelopes, EncodedEnvelopes):
        return envelopes.format(_EVENT)
    return b"".join(_EVENT % (e.seq, encode_envelope(e)) for e in envelopes)
