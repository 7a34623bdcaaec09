"""Where the token may come as ``?token=`` instead of a header: a browser can set no header on a
WebSocket upgrade, nor on an EventSource (a GET of a run's ``…/events``). gateway/auth.py takes
it there, and the API's description says so (gateway/apidocs/document.py)."""

from __future__ import annotations


def event_stream(method: str, path: str) -> bool:
    """A GET of an event stream, whose browser client (EventSource) sends no headers."""
    return method.upper() == "GET" and path.endswith("/events")
