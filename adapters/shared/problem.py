"""RFC 9457 problem responses: the one error shape of loopgate's HTTP endpoints."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

PROBLEM_TYPE = "application/problem+json"

_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    410: "Gone",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Problem(msgspec.Struct, kw_only=True):
    """An RFC 9457 problem: ``detail`` says what was wrong, in the gateway's own words. Some
    problems carry more members (an ingest error's ``line``, ``accepted``, ``last_seq``)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str


class HttpProblem(Exception):
    """Raised by endpoint code; the app turns it into a problem response."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra or {}


def problem_body(status: int, detail: str, extra: dict[str, Any] | None = None) -> bytes:
    problem = Problem(title=_TITLES.get(status, "Error"), status=status, detail=detail)
    if not extra:
        return msgspec.json.encode(problem)
    return msgspec.json.encode({**msgspec.structs.asdict(problem), **extra})


def problem_response(
    status: int,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    return Response(
        problem_body(status, detail, extra),
        status_code=status,
        media_type=PROBLEM_TYPE,
        headers=headers,
    )


def from_problem(exc: HttpProblem) -> Response:
    return problem_response(exc.status, exc.detail, headers=exc.headers, extra=exc.extra)


def problem_for(exc: Exception) -> HttpProblem | None:
    """The HTTP problem for one of our exceptions, or None (the caller's 500, logged).

    Its detail is our own words (contracts.client_errors): a bare ``ValueError`` is not ours,
    it may be Python's ``invalid literal for int()``."""
    from ...contracts.agents import UnknownAgent
    from ...contracts.client_errors import client_message
    from ...contracts.ports import (
        Forbidden,
        LimitReached,
        RunExists,
        RunFinished,
        RunGone,
        RunNotFound,
        RunNotIngest,
        RunTooLarge,
        ThreadBusy,
        Unavailable,
    )

    if isinstance(exc, HttpProblem):
        return exc
    detail = client_message(exc)
    if detail is None:
        return None
    if isinstance(exc, RunGone):
        return HttpProblem(410, detail)
    if isinstance(exc, Forbidden):
        return HttpProblem(403, detail)
    if isinstance(exc, RunNotFound | UnknownAgent):
        return HttpProblem(404, detail)
    if isinstance(exc, RunTooLarge):
        return HttpProblem(413, detail)
    if isinstance(exc, Unavailable):
        return HttpProblem(503, detail, headers={"retry-after": str(exc.retry_after)})
    if isinstance(exc, LimitReached):
        return HttpProblem(429, detail, headers={"retry-after": str(exc.retry_after)})
    if isinstance(exc, RunExists | RunFinished | RunNotIngest | ThreadBusy):
        return HttpProblem(409, detail)
    # ClientError: validation in our words (LoopConfig, replay names, envelopes…).
    return HttpProblem(422, detail)
