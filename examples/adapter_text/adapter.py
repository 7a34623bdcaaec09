"""The registry entry of the text transcript: its projector, its bytes, and its one route."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from examples.adapter_text.projector import TextProjector
from loopgate.adapters.shared.follow import follow, stream_policy
from loopgate.adapters.shared.stream import StreamResponse, Write
from loopgate.contracts.limits import EndpointLimits
from loopgate.contracts.ports import RunService
from loopgate.contracts.projector import ProjectorContext

MEDIA_TYPE = "text/plain; charset=utf-8"


class TextAdapter:
    """``contracts.projector.Adapter`` of the plain-text transcript."""

    name = "text"

    def projector(self, context: ProjectorContext) -> TextProjector:
        return TextProjector(context)

    def to_builtins(self, message: str) -> str:
        return message

    def render(self, messages: list[str]) -> bytes:
        return "".join(messages).encode()

    def routes(self, service: RunService, limits: EndpointLimits) -> list[BaseRoute]:
        # Writes bounded, a slow client cut off, as for every streamed response. No
        # keep-alives: plain text has no comment to send.
        policy = stream_policy(limits)

        async def stream_run(request: Request) -> Response:
            run_id = request.path_params["run_id"]
            projector = self.projector(ProjectorContext(run_id=run_id, thread_id=run_id))

            async def produce(opened: Callable[[], Awaitable[None]], write: Write) -> None:
                async def send(messages: list[str]) -> None:
                    await write(self.render(messages))

                await follow(
                    lambda after: service.subscribe(run_id, after=after, consumer=self.name),
                    projector,
                    send,
                    policy,
                    opened=opened,
                )

            # A missing run is still a 404 problem: nothing is sent before ``opened``.
            return StreamResponse(produce, media_type=MEDIA_TYPE)

        return [Route("/text/runs/{run_id}", stream_run, methods=["GET"])]


ADAPTER = TextAdapter()
