"""A2A's errors in both bindings' shapes: a JSON-RPC error (code, message, ``data`` with a
``google.rpc.ErrorInfo``) and the HTTP+JSON binding's ``google.rpc.Status`` body.

The codes and reasons are A2A 1.0's (the ``a2a-sdk`` maps them back to its exceptions). The
run service's own refusals (limits, quotas, scopes) keep their HTTP status and their words.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from ...contracts.client_errors import ClientError, client_message
from ...contracts.ports import ThreadBusy
from ..shared.problem import problem_for

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
DOMAIN = "a2a-protocol.org"
_HTTP_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "FAILED_PRECONDITION",
    410: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class A2AError(Exception):
    """An error a client is told: ``code`` (JSON-RPC), ``reason`` (ErrorInfo) and ``http``."""

    def __init__(
        self, code: int, reason: str, http: int, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.http = http
        self.message = message
        self.headers = headers or {}

    @classmethod
    def task_not_found(cls, task_id: str) -> A2AError:
        return cls(-32001, "TASK_NOT_FOUND", 404, f"no task with id {task_id[:200]!r}")

    @classmethod
    def not_cancelable(cls, message: str) -> A2AError:
        return cls(-32002, "TASK_NOT_CANCELABLE", 400, message)

    @classmethod
    def push_not_supported(cls, message: str) -> A2AError:
        return cls(-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 400, message)

    @classmethod
    def unsupported(cls, message: str) -> A2AError:
        return cls(-32004, "UNSUPPORTED_OPERATION", 400, message)

    @classmethod
    def content_type(cls, message: str) -> A2AError:
        return cls(-32005, "CONTENT_TYPE_NOT_SUPPORTED", 400, message)

    @classmethod
    def invalid_params(cls, message: str) -> A2AError:
        return cls(-32602, "INVALID_PARAMS", 400, message)

    @classmethod
    def invalid_request(cls, message: str) -> A2AError:
        return cls(-32600, "INVALID_REQUEST", 400, message)

    @classmethod
    def method_not_found(cls, method: str) -> A2AError:
        return cls(-32601, "METHOD_NOT_FOUND", 404, f"no method {method[:100]!r}")

    @classmethod
    def parse_error(cls, message: str) -> A2AError:
        return cls(-32700, "PARSE_ERROR", 400, message)

    @classmethod
    def internal(cls) -> A2AError:
        return cls(-32603, "INTERNAL_ERROR", 500, "internal error; the server log has the details")

    def info(self) -> dict[str, Any]:
        return {"@type": ERROR_INFO, "reason": self.reason, "domain": DOMAIN}

    def rpc_error(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": [self.info()]}

    def status_body(self) -> dict[str, Any]:
        status = _HTTP_STATUS.get(self.http, "UNKNOWN")
        return {
            "error": {
                "code": self.http,
                "status": status,
                "message": self.message,
                "details": [self.info()],
            }
        }

    def response(self) -> Response:
        from starlette.responses import JSONResponse

        return JSONResponse(self.status_body(), status_code=self.http, headers=self.headers)


def translate(exc: Exception) -> A2AError | None:
    """Our exceptions in A2A's words; None for one that is not ours (the caller logs it)."""
    if isinstance(exc, A2AError):
        return exc
    if isinstance(exc, ThreadBusy):
        return A2AError.unsupported(exc.detail)
    if isinstance(exc, ClientError) and exc.field == "content":
        # A part of a kind the agent does not take: A2A's own error for a content type.
        return A2AError.content_type(exc.message)
    problem = problem_for(exc)
    if problem is None:
        return None
    detail = client_message(exc) or problem.detail
    if problem.status in (404, 410):
        return A2AError(-32001, "TASK_NOT_FOUND", problem.status, detail)
    if problem.status in (400, 409, 413, 422):
        return A2AError(-32602, "INVALID_PARAMS", problem.status, detail)
    # Scopes, limits, quotas, an unreachable dependency: the server's, with HTTP's status.
    return A2AError(-32603, "INTERNAL_ERROR", problem.status, detail, dict(problem.headers))
