"""The JSON-RPC error codes of loopgate's two JSON-RPC protocols, in one table.

The spec's five mean the same in both. Above them each protocol has its own: ACP's schema gives
-32000 (authentication required) and -32002 (resource not found) meanings of its own, and
loopgate's JSON-RPC API numbers its server errors from -32000. So a server code is read with its
protocol: -32002 is "Resource not found" to an ACP client and "Limit reached" to a JSON-RPC one.
Codes are stable: clients branch on them, so one is never reused or renumbered.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Protocol = Literal["acp", "jsonrpc"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# ACP's own (its schema's Error codes).
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002

# loopgate's JSON-RPC API (docs/jsonrpc.md): -32000…-32099, the spec's server-error range.
RUN_NOT_FOUND = -32000
RUN_FINISHED = -32001
LIMIT_REACHED = -32002
RUN_EXISTS = -32003
STREAMING_REQUIRED = -32004
SUBSCRIPTION_NOT_FOUND = -32005
TOO_LARGE = -32006
NOT_ACCEPTED = -32007
RUN_GONE = -32008
RESPONSE_LIMIT = -32009
FORBIDDEN = -32010


class ErrorCode(NamedTuple):
    code: int
    message: str  # the fixed ``error.message`` (ACP's messages begin with it)
    meaning: str
    protocols: tuple[Protocol, ...]


BOTH: tuple[Protocol, ...] = ("acp", "jsonrpc")

TABLE: tuple[ErrorCode, ...] = (
    ErrorCode(PARSE_ERROR, "Parse error", "the message is not JSON, or nests deeper than "
              "max_json_depth levels", BOTH),
    ErrorCode(INVALID_REQUEST, "Invalid Request", "not a request object (the shape checks of "
              "adapters.shared.jsonrpc)", BOTH),
    ErrorCode(METHOD_NOT_FOUND, "Method not found", "no such method", BOTH),
    ErrorCode(INVALID_PARAMS, "Invalid params", "a parameter is missing or of the wrong type "
              "or range", BOTH),
    ErrorCode(INTERNAL_ERROR, "Internal error", "an unexpected failure (the log has it); for ACP "
              "also a busy gateway or connection, with data.retryAfter", BOTH),
    ErrorCode(AUTH_REQUIRED, "Authentication required", "ACP's; loopgate asks for none",
              ("acp",)),
    ErrorCode(RESOURCE_NOT_FOUND, "Resource not found", "no session (or run) with this id",
              ("acp",)),
    ErrorCode(RUN_NOT_FOUND, "Run not found", "no run with this id (it never existed or was "
              "dropped by retention)", ("jsonrpc",)),
    ErrorCode(RUN_FINISHED, "Run already finished", "the run has ended; steering or answering "
              "it is no longer possible", ("jsonrpc",)),
    ErrorCode(LIMIT_REACHED, "Limit reached", "too many active runs, subscribers or "
              "subscriptions; data.retryAfter is a hint in seconds", ("jsonrpc",)),
    ErrorCode(RUN_EXISTS, "Run already exists", "a run with the client-chosen runId already "
              "exists", ("jsonrpc",)),
    ErrorCode(STREAMING_REQUIRED, "Streaming transport required", "the method needs a WebSocket "
              "or stdio connection; over HTTP use run.events", ("jsonrpc",)),
    ErrorCode(SUBSCRIPTION_NOT_FOUND, "Subscription not found", "no subscription with this id "
              "on this connection", ("jsonrpc",)),
    ErrorCode(TOO_LARGE, "Request too large", "the message or batch is larger than the "
              "configured limit", ("jsonrpc",)),
    ErrorCode(NOT_ACCEPTED, "Not accepted", "the run is live but refused the command (e.g. no "
              "such pending permission request)", ("jsonrpc",)),
    ErrorCode(RUN_GONE, "Run gone", "the run existed but has finished and was dropped to keep "
              "the gateway within its memory or retention bounds (the memory journal); "
              "data.detail says which", ("jsonrpc",)),
    ErrorCode(RESPONSE_LIMIT, "Response limit reached", "the batch's response reached its size "
              "limit before this item: it was not run; send it again in a request of its own",
              ("jsonrpc",)),
    ErrorCode(FORBIDDEN, "Forbidden", "the caller's scopes do not allow this (a read-only key "
              "starting or cancelling a run)", BOTH),
)  # fmt: skip


def codes(protocol: Protocol) -> dict[int, ErrorCode]:
    """The codes a client of ``protocol`` may see."""
    return {e.code: e for e in TABLE if protocol in e.protocols}


def is_server_code(code: int) -> bool:
    """In the spec's range for implementation-defined server errors."""
    return -32099 <= code <= -32000
