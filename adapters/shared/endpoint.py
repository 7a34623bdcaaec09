"""Endpoint wrapper: port exceptions become problem responses; nothing else leaks."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from .problem import from_problem, problem_for, problem_response

log = logging.getLogger("loopgate.http")

Endpoint = Callable[[Request], Awaitable[Response]]


def guarded(endpoint: Endpoint) -> Endpoint:
    @functools.wraps(endpoint)
    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            problem = problem_for(exc)
            if problem is not None:
                return from_problem(problem)
            log.exception("unexpected error in %s %s", request.method, request.url.path)
            return problem_response(500, "internal error; the server log has the details")

    return wrapper
