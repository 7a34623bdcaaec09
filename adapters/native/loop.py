"""``GET /v1/agents``: the agents this gateway serves; ``GET /v1/loop``: the default one's loop.

Each agent (contracts.agents.AgentInfo) says its name, description, its loop's name
(``reference``, ``python:pkg.mod:attr``, ``http:URL``, ``stdio:COMMAND``) and, for the reference
loop, its model (``loopgate-scripted`` for the embedded one). A plugged loop names its model in
its runs' ``stage_start`` events, if at all: ``model`` is null here. Behind the credentials
like the rest of the API: a loop's URL or command is the operator's business.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts.agents import AgentInfo
from ...contracts.ports import RunService


class LoopView(msgspec.Struct, kw_only=True):
    name: str | None
    model: str | None


class AgentList(msgspec.Struct, kw_only=True):
    """The agents, the default first."""

    agents: list[AgentInfo]


async def loop_view(service: RunService) -> LoopView:
    agents = await service.agents()
    if not agents:
        return LoopView(name=None, model=None)
    return LoopView(name=agents[0].loop, model=agents[0].model)


def routes(service: RunService) -> list[BaseRoute]:
    # Read per request: a reload (serve --reload) may change the agents.
    async def get_loop(request: Request) -> Response:
        return Response(
            msgspec.json.encode(await loop_view(service)), media_type="application/json"
        )

    async def get_agents(request: Request) -> Response:
        listed = AgentList(agents=await service.agents())
        return Response(msgspec.json.encode(listed), media_type="application/json")

    return [
        Route("/v1/loop", get_loop, methods=["GET"]),
        Route("/v1/agents", get_agents, methods=["GET"]),
    ]
