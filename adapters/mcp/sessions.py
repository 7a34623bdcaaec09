"""MCP sessions over stateless HTTP: enough of one to cancel a call from another request.

The official SDKs cancel a ``tools/call`` over streamable HTTP (2025 protocol versions) with a
``notifications/cancelled`` POSTed on its own, naming the call by its JSON-RPC id; a
stateless server has no session to look that id up in, and client-chosen ids repeat from
client to client. So ``/mcp`` gives each client an ``Mcp-Session-Id`` with its ``initialize``
answer — a random token, kept nowhere: the SDK clients send it back on every request — and a
``run`` (or an agent's own tool) called in a session gets a run id derived from the session
and the call's id. A
cancellation names the same run on any instance of the gateway, and only for whoever holds the
session: without its token the run id cannot be derived. Holding it is not enough either: the
token is no credential, so a cancellation is the caller's, checked like any other (only the
run's owner or an admin cancels it; adapters.mcp.http).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import msgspec

from .tools import CANCEL_RUN, GET_RUN, LIST_RUNS

SESSION_HEADER = "mcp-session-id"
# The tools that start no run; every other name may (``run``, an agent's own tool).
_DATA_TOOLS = (GET_RUN, LIST_RUNS, CANCEL_RUN)
CANCELLED = "notifications/cancelled"
RequestId = str | int


def new_session_id() -> str:
    """A session id as the transport asks for: unguessable, visible ASCII."""
    return secrets.token_urlsafe(32)


def run_id_for(session_id: str, request_id: RequestId) -> str:
    """The run a session's ``run`` call with this id starts (``1`` and ``"1"`` differ, as
    they do in JSON-RPC)."""
    key = session_id.encode() + b"\n" + msgspec.json.encode(request_id)
    return "run_" + hashlib.sha256(key).hexdigest()[:32]


class _Params(msgspec.Struct, rename="camel"):
    name: Any = None  # tools/call's tool
    request_id: Any = None  # notifications/cancelled's call


class _Message(msgspec.Struct):
    """The part of a POSTed message ``/mcp`` looks at before the SDK reads it."""

    method: Any = None
    id: Any = None
    params: _Params | None = None


class Peeked(msgspec.Struct, frozen=True):
    method: str | None
    # The id of a ``tools/call`` that may start a run: ``run``, or an agent's own tool (which
    # names are agents' the server knows; an unknown tool's call starts nothing).
    runs: RequestId | None = None
    cancels: RequestId | None = None  # the call a ``notifications/cancelled`` names


NOTHING = Peeked(None)
_decode = msgspec.json.Decoder(_Message).decode


def _request_id(value: Any) -> RequestId | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def peek(body: bytes) -> Peeked:
    """What the body is, as far as sessions care; anything unreadable is left to the SDK."""
    try:
        message = _decode(body)
    except (msgspec.DecodeError, RecursionError):
        return NOTHING
    method = message.method if isinstance(message.method, str) else None
    params = message.params or _Params()
    if method == CANCELLED:
        return Peeked(method, cancels=_request_id(params.request_id))
    if method == "tools/call" and isinstance(params.name, str) and params.name not in _DATA_TOOLS:
        return Peeked(method, runs=_request_id(message.id))
    return Peeked(method)


def session_of(headers: Any) -> str | None:
    """The session a request belongs to (``headers``: a mapping of the request's headers)."""
    value = headers.get(SESSION_HEADER)
    return value if isinstance(value, str) and value else None
