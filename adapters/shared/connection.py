"""What an endpoint may ask of the connection under it beyond ASGI, through callables loopgate's
server puts in the scope's ``extensions`` (``gateway/http_protocol.py``). Under another server
(an ASGI test transport) they are absent and asking does nothing.

- ``stream_body(scope, idle_s)``: this request's body is a stream that may go on as long as
  the client has something to send (the NDJSON ingest), so the total body deadline does not
  apply; a gap of ``idle_s`` without a byte still ends it.
- ``abort(scope)``: drop the connection at once, for a response that cannot be completed
  because the client stopped reading (a server would otherwise take the unfinished response
  for a bug of the application and log it as one).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

STREAM_BODY = "loopgate.stream_body"
ABORT = "loopgate.abort"


def _extension(scope: MutableMapping[str, Any], name: str) -> Callable[..., object] | None:
    extensions = scope.get("extensions") or {}
    found = extensions.get(name)
    return found if callable(found) else None


def stream_body(scope: MutableMapping[str, Any], idle_s: float) -> None:
    lift = _extension(scope, STREAM_BODY)
    if lift is not None:
        lift(idle_s)


def abort(scope: MutableMapping[str, Any]) -> bool:
    """True if the server dropped the connection."""
    drop = _extension(scope, ABORT)
    if drop is None:
        return False
    drop()
    return True
