"""JSON-RPC error codes: the spec's own, and loopgate's stable server codes (-32000…-32099).

Every error carries the code's fixed ``message`` and a ``data`` object whose ``detail`` says what
was wrong; -32602 adds ``param`` (the offending parameter's name). Exception text never reaches a
client: unexpected failures become a plain -32603.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Server-defined codes. Stable: clients branch on them, so a code is never reused or renumbered.
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

MESSAGES: dict[int, str] = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    RUN_NOT_FOUND: "Run not found",
    RUN_FINISHED: "Run already finished",
    LIMIT_REACHED: "Limit reached",
    RUN_EXISTS: "Run already exists",
    STREAMING_REQUIRED: "Streaming transport required",
    SUBSCRIPTION_NOT_FOUND: "Subscription not found",
    TOO_LARGE: "Request too large",
    NOT_ACCEPTED: "Not accepted",
    RUN_GONE: "Run gone",
    RESPONSE_LIMIT: "Response limit reached",
}

# What each server code means, for docs/jsonrpc.md and the rpc.discover document.
SERVER_CODES: dict[int, str] = {
    RUN_NOT_FOUND: "no run with this id (it never existed or was dropped by retention)",
    RUN_FINISHED: "the run has ended; steering or answering it is no longer possible",
    LIMIT_REACHED: "too many active runs, subscribers or subscriptions; data.retryAfter "
    "is a hint in seconds",
    RUN_EXISTS: "a run with the client-chosen runId already exists",
    STREAMING_REQUIRED: "the method needs a WebSocket or stdio connection; over HTTP use "
    "run.events",
    SUBSCRIPTION_NOT_FOUND: "no subscription with this id on this connection",
    TOO_LARGE: "the message or batch is larger than the configured limit",
    NOT_ACCEPTED: "the run is live but refused the command (e.g. no such pending "
    "permission request)",
    RUN_GONE: "the run existed but has finished and was dropped to keep the gateway within its "
    "memory or retention bounds (the memory journal); data.detail says which",
    RESPONSE_LIMIT: "the batch's response reached its size limit before this item: it was not "
    "run; send it again in a request of its own",
}


class RpcError(Exception):
    """Raised by method code; becomes the error object of the call's response."""

    def __init__(self, code: int, detail: str, **data: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.data = data

    def error_object(self) -> dict[str, Any]:
        return error_object(self.code, self.detail, **self.data)


def error_object(code: int, detail: str | None = None, **data: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": MESSAGES[code]}
    if detail is not None:
        body["data"] = {"detail": detail, **{k: v for k, v in data.items() if v is not None}}
    return body


def invalid_params(param: str | None, detail: str) -> RpcError:
    return RpcError(INVALID_PARAMS, detail, param=param)
