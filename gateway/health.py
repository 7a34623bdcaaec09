"""``GET /healthz``: the gateway is up, and which adapters it serves; ``GET /readyz``: whether
it should be sent new work now (not while it shuts down, nor while its journal cannot commit:
a full or unreachable Redis). Both are open without the token."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# Where load balancers and the listener (served even past the connection cap) find it.
PATH = "/healthz"
READY_PATH = "/readyz"


class Health(msgspec.Struct):
    """The gateway answers; ``adapters`` are the protocols it serves."""

    status: Literal["ok"]
    adapters: list[str]


def route(adapters: Iterable[str]) -> Route:
    body = msgspec.json.encode(Health("ok", sorted(adapters)))

    async def healthz(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Route(PATH, healthz)


class Readiness(msgspec.Struct):
    """``ready``, or ``unready`` (503) with why: a load balancer sends it nothing new meanwhile,
    while ``/healthz`` (liveness) still answers."""

    status: Literal["ready", "unready"]
    reasons: list[str]


_encode_readiness = msgspec.json.Encoder().encode


def readiness_route(reasons: Callable[[], list[str]]) -> Route:
    async def readyz(request: Request) -> Response:
        why = reasons()
        body = _encode_readiness(Readiness("unready" if why else "ready", why))
        return Response(body, status_code=503 if why else 200, media_type="application/json")

    return Route(READY_PATH, readyz)
