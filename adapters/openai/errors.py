"""OpenAI's error shape for every error this adapter answers.

``{"error": {"message", "type", "param", "code"}}`` with the status OpenAI uses: 400 for a body
that is malformed or asks for something loopgate cannot do, 404 ``model_not_found``, 413 for a
body over the limit, 429 when the gateway is full, 500 for a run that failed. The SDKs raise
their own exception class for each status (``BadRequestError``, ``NotFoundError``…) with this
``message``. Messages are our own words (contracts.client_errors), never an exception's text.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from loopgate.adapters.openai.request import InvalidRequest
from loopgate.adapters.openai.wire import ApiError, ErrorBody
from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.client_errors import describe_input_error

log = logging.getLogger("loopgate.openai")
JSON = "application/json"

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"
_TYPES = {429: "rate_limit_error"}
_CODES = {413: "request_too_large", 429: "rate_limit_exceeded"}
# The path msgspec names (after describe_input_error): "… - at `messages[0].role`".
_AT = re.compile(r" - at `([^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `([^`]*)`")

Endpoint = Callable[[Request], Awaitable[Response]]


class OpenAIError(Exception):
    """Raised by endpoint code; :func:`guarded` answers it."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(message=message, type=type, param=param, code=code)
        self.headers = headers or {}


def error_response(status: int, body: ErrorBody, headers: dict[str, str] | None = None) -> Response:
    return Response(
        msgspec.json.encode(ApiError(error=body)), status, headers=headers, media_type=JSON
    )


def invalid_body(exc: msgspec.DecodeError) -> OpenAIError:
    """A body msgspec refused: malformed JSON (``param`` null) or a field of the wrong shape."""
    detail = describe_input_error(exc)
    if not isinstance(exc, msgspec.ValidationError):
        return OpenAIError(400, f"the body is not valid JSON: {detail}")
    at = _AT.search(detail)
    path = at.group(1) if at else None
    missing = _MISSING.match(detail)
    if missing:
        path = f"{path}.{missing.group(1)}" if path else missing.group(1)
    return OpenAIError(400, f"invalid request body: {detail}", param=path)


def from_exception(exc: Exception) -> OpenAIError | None:
    """OpenAI's error for one of ours (a port's refusal, a bounded read), or None."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, InvalidRequest):
        return OpenAIError(400, exc.message, param=exc.param)
    problem = problem_for(exc)
    if problem is None:
        return None
    status = problem.status
    # Loopgate's 422 (a LoopConfig value, say) is what OpenAI answers with 400.
    status = 400 if status == 422 else status
    return OpenAIError(
        status,
        problem.detail,
        type=_TYPES.get(status, INVALID_REQUEST if status < 500 else SERVER_ERROR),
        code=_CODES.get(status),
        headers=problem.headers,
    )


def guarded(endpoint: Endpoint) -> Endpoint:
    """Errors in OpenAI's shape; one that is not ours is logged and answered 500."""

    @functools.wraps(endpoint)
    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            error = from_exception(exc)
            if error is None:
                log.exception("unexpected error in %s %s", request.method, request.url.path)
                error = OpenAIError(
                    500, "internal error; the server log has the details", type=SERVER_ERROR
                )
            return error_response(error.status, error.body, error.headers)

    return wrapper
