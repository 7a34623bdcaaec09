"""JSON-RPC 2.0 on the wire for the JSON-RPC API: the messages we send, and the answers to what
the shared validator (adapters.shared.jsonrpc) refuses.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..shared.jsonrpc import JSONRPC, Id, Invalid
from ..shared.rpc_errors import PARSE_ERROR
from .errors import error_object


class Success(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"] = JSONRPC
    result: Any
    id: Id


class Failure(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"] = JSONRPC
    error: dict[str, Any]
    id: Id


class Notification(msgspec.Struct, kw_only=True):
    """A server→client notification (``run.event``, ``run.end``)."""

    jsonrpc: Literal["2.0"] = JSONRPC
    method: str
    params: dict[str, Any]


class Request(msgspec.Struct, kw_only=True):
    """A server→client request (``run.permission``); the client answers with a response."""

    jsonrpc: Literal["2.0"] = JSONRPC
    id: str
    method: str
    params: dict[str, Any]


Response = Success | Failure

encode = msgspec.json.Encoder().encode


def failure(rid: Id, error: dict[str, Any]) -> Failure:
    return Failure(error=error, id=rid)


def parse_error(detail: str) -> bytes:
    return encode(Failure(error=error_object(PARSE_ERROR, detail), id=None))


def invalid(item: Invalid) -> Failure:
    return Failure(error=error_object(item.code, item.detail), id=item.id)
