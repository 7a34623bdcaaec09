"""OpenAI's error shape for every error this adapter answers, and the gateway's refusals.

``{"error": {"message", "type", "param", "code"}}`` with the status OpenAI uses: 400 for a body
that is malformed or asks for something loopgate cannot do, 403 ``request_forbidden`` for a key
whose scopes do not allow it, 404 ``model_not_found`` (and for someone else's thread, as for an
unknown one), 413 for a body over the limit, 429 when the gateway is full, 500 for a run that
failed. The SDKs raise
their own exception class for each status (``BadRequestError``, ``NotFoundError``…) with this
``message`` (a problem+json body would leave them "Error code: 401" alone). Messages are our
own words (contracts.client_errors), never an exception's text.

The gateway's refusals (contracts/refusals.py) on OpenAI's paths take the codes OpenAI gives
them: a wrong key ``invalid_api_key`` (a missing one no code, as OpenAI's), an unknown path
``unknown_url``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...contracts.client_errors import describe_input_error
from ...contracts.ports import Forbidden
from ...contracts.refusals import Reason, Refusal
from ..shared.problem import HttpProblem, problem_for
from .request import InvalidRequest
from .wire import ApiError, ErrorBody

log = logging.getLogger("loopgate.openai")
JSON = "application/json"

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"
# A key whose scopes do not allow the request (a ``read`` key asking for a completion): the
# type OpenAI gives its own 403 refusals of a request, and the SDKs' PermissionDeniedError.
FORBIDDEN, NO_PERMISSION = "request_forbidden", "permission_denied"
_TYPES = {429: "rate_limit_error"}
_CODES = {413: "request_too_large", 429: "rate_limit_exceeded"}
_REFUSALS: dict[Reason, tuple[str | None, str | None]] = {
    # reason: (code, OpenAI-client words in place of the gateway's)
    "no_credentials": (
        None,
        "You didn't provide an API key: set the client's API key to this gateway's token "
        "(sent as 'Authorization: Bearer <token>').",
    ),
    "wrong_credentials": (
        "invalid_api_key",
        "Incorrect API key provided: the API key must be this gateway's token (the one "
        "`loopgate serve` was given with --token or --token-file).",
    ),
    "no_endpoint": ("unknown_url", None),
}
_SERVED = "of OpenAI's API, this gateway serves POST /v1/chat/completions and GET /v1/models"
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
    if isinstance(exc, Forbidden):
        return OpenAIError(403, problem.detail, type=FORBIDDEN, code=NO_PERMISSION)
    status = problem.status
    # Loopgate's 422 (a LoopConfig value, say) is what OpenAI answers with 400.
    status = 400 if status == 422 else status
    return OpenAIError(
        status,
        problem.detail,
        type=error_type(status),
        code=_CODES.get(status),
        headers=problem.headers,
    )


def error_type(status: int) -> str:
    return _TYPES.get(status, INVALID_REQUEST if status < 500 else SERVER_ERROR)


def refusal_response(refusal: Refusal) -> Response:
    """One of the gateway's refusals in OpenAI's shape."""
    code, words = _REFUSALS.get(refusal.reason, (None, None))
    if refusal.reason == "no_endpoint":
        words = f"{refusal.detail} ({_SERVED})"
    body = ErrorBody(message=words or refusal.detail, type=error_type(refusal.status), code=code)
    return error_response(refusal.status, body, refusal.headers)


def refused(problem: HttpProblem) -> Response:
    """A problem met before a stream opened (``StreamResponse``'s ``refuse``), OpenAI's way."""
    error = from_exception(problem)
    assert error is not None  # a problem is always one of ours
    return error_response(error.status, error.body, error.headers)


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
