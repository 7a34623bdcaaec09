"""``SSEDecoder``: the ``data`` of server-sent events from a byte stream, incrementally."""

from __future__ import annotations

from collections.abc import Iterator


class SSEDecoder:
    """Incremental decoder for the ``data`` of server-sent events (WHATWG ``text/event-stream``).

    Feed it bytes as they arrive; it returns the data of each complete event. Lines may end in
    LF, CRLF or a lone CR, split anywhere across feeds. Comments and fields other than ``data``
    are ignored (``event``/``id``/``retry`` mean nothing to a chat-completions stream).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        # A CR at the very end of a feed may be the first half of a CRLF split across feeds.
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        self._buffer += chunk
        events: list[bytes] = []
        for line in self._complete_lines():
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[bytes]:
        """End of stream: dispatch a last event that lacks its blank line.

        The spec discards such an event; real servers sometimes end on ``data: [DONE]\\n``, so
        a last *complete* line is honoured. An unterminated line is a truncated one: dropped.
        """
        self._buffer.clear()
        event = b"\n".join(self._data)
        self._data = []
        return [event] if event else []

    def _complete_lines(self) -> Iterator[bytes]:
        buf = self._buffer
        start = 0
        while True:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if lf != -1 and (cr == -1 or lf < cr):
                yield bytes(buf[start:lf])
                start = lf + 1
                continue
            yield bytes(buf[start:cr])
            if cr + 1 < len(buf):
                start = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
            else:
                start = cr + 1
                self._pending_cr = True
        del buf[:start]

    def _process_line(self, line: bytes) -> bytes | None:
        if not line:
            event = b"\n".join(self._data)
            self._data = []
            # As the spec says: an event whose data is empty is not dispatched.
            return event or None
        if line.startswith(b":"):
            return None
        field, sep, value = line.partition(b":")
        if field != b"data":
            return None
        if sep and value.startswith(b" "):
            value = value[1:]
        self._data.append(value)
        return None
