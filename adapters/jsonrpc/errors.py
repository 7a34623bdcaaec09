"""The JSON-RPC API's error objects; the codes are the shared table's (adapters.shared.rpc_errors).

Every error carries the code's fixed ``message`` and a ``data`` object whose ``detail`` says what
was wrong; -32602 adds ``param`` (the offending parameter's name). Exception text never reaches a
client: unexpected failures become a plain -32603.
"""

from __future__ import annotations

from typing import Any

from ..shared.rpc_errors import INVALID_PARAMS, codes, is_server_code

_CODES = codes("jsonrpc")
MESSAGES: dict[int, str] = {code: entry.message for code, entry in _CODES.items()}
# What each server code means, for docs/jsonrpc.md and the rpc.discover document.
SERVER_CODES: dict[int, str] = {
    code: entry.meaning for code, entry in _CODES.items() if is_server_code(code)
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
