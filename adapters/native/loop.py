"""``GET /v1/loop``: which loop serves this gateway's runs, and on which model.

Read from the run service's ``loop`` (contracts.loop.AgentLoop, which the gateway's hub
exposes): its ``name`` (``reference``, ``python:pkg.mod:attr``, ``http:URL``,
``stdio:COMMAND``) and, for the reference loop, its provider's ``model`` (``loopgate-scripted``
for the embedded one, ``--openai-model`` for a real one). A plugged loop names its model in its
runs' ``stage_start`` events, if at all: ``model`` is null here. Behind the token like the rest
of the API: a loop's URL or command is the operator's business.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from loopgate.adapters.shared.served import served_loop
from loopgate.contracts.ports import RunService


class LoopView(msgspec.Struct, kw_only=True):
    name: str | None
    model: str | None


def loop_view(service: RunService) -> LoopView:
    name, model = served_loop(service)
    return LoopView(name=name, model=model)


def routes(service: RunService) -> list[BaseRoute]:
    body = msgspec.json.encode(loop_view(service))

    async def get_loop(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return [Route("/v1/loop", get_loop, methods=["GET"])]
