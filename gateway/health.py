"""``GET /healthz``: the gateway is up, and which adapters it serves (open without the token)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# Where load balancers and the listener (served even past the connection cap) find it.
PATH = "/healthz"


class Health(msgspec.Struct):
    """The gateway answers; ``adapters`` are the protocols it serves."""

    status: Literal["ok"]
    adapters: list[str]


def route(adapters: Iterable[str]) -> Route:
    body = msgspec.json.encode(Health("ok", sorted(adapters)))

    async def healthz(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Route(PATH, healthz)
