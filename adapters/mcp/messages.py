"""A message from an MCP client, judged before the SDK reads it, over stdio and HTTP alike.

The SDK answers a message it cannot validate with pydantic's text ("Validation error: 4
validation errors for union[JSONRPCRequest,…] … input_value=…", -32602 for what the spec calls
an invalid request); nothing it is handed here fails its validation. The words are the shared
validator's (adapters.shared.jsonrpc), the rules MCP's: no batches (removed in 2025-06-18),
ids strings or integers, never null, params an object.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from mcp import types
from pydantic import ValidationError

from ..shared.jsonrpc import (
    ACP,
    Call,
    Invalid,
    ParseFailure,
    classify,
    parse,
    valid_id,
)
from ..shared.rpc_errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR

# ACP's rules are MCP's: no batches, integer or string ids, named params, non-empty methods.
RULES = ACP
RequestId = str | int
_PREFIX = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid request",
    INVALID_PARAMS: "Invalid params",
}


class Refused(NamedTuple):
    """Why a line or a body is no message for the server, as a JSON-RPC error."""

    code: int
    message: str
    id: RequestId | None = None

    def error(self) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        }


def refused(code: int, detail: str, request_id: Any = None) -> Refused:
    readable = request_id if request_id is not None and valid_id(request_id, RULES) else None
    return Refused(code, f"{_PREFIX[code]}: {detail}", readable)


def message_of(raw: bytes, max_depth: int) -> types.JSONRPCMessage | Refused:
    """The message in ``raw``, as the SDK reads it, or why it is none."""
    try:
        doc = parse(raw, max_depth)
    except ParseFailure as exc:
        return refused(PARSE_ERROR, exc.detail)
    if isinstance(doc, list):
        return refused(INVALID_REQUEST, "a batch; MCP sends one message at a time")
    item = classify(doc, RULES)
    if isinstance(item, Invalid):
        return refused(item.code, item.detail, item.id)
    if isinstance(item, Call) and not item.notification and item.id is None:
        return refused(INVALID_REQUEST, 'member "id" must be a string or an integer, got null')
    try:
        return types.jsonrpc_message_adapter.validate_python(doc, by_name=False)
    except ValidationError:
        # Past the checks above: a reply whose error is not an error object, say.
        return refused(INVALID_REQUEST, "not a JSON-RPC 2.0 message", item.id)


def refusal(raw: bytes, max_depth: int) -> dict[str, Any] | None:
    """The JSON-RPC error that answers ``raw``, or None when it is a message for the server."""
    message = message_of(raw, max_depth)
    return message.error() if isinstance(message, Refused) else None


def invalid_request(detail: str) -> dict[str, Any]:
    """The -32600 error that answers a request refused before its body is read."""
    return refused(INVALID_REQUEST, detail).error()
