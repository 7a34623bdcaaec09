"""The registry entry of the text transcript: its projector, its bytes, and its one route."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from examples.adapter_text.projector import TextProjector
from loopgate.adapters.shared.follow import FollowPolicy
from loopgate.adapters.shared.stream import ResponseStream
from loopgate.contracts.envelope import Envelope
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
        policy = FollowPolicy(write_timeout_s=limits.write_timeout_s)

        async def stream_run(request: Request) -> Response:
            stream = TextStream(self, service, request.path_params["run_id"], policy)
            # A missing run is still a 404 problem: nothing is sent before its subscription opens.
            return stream.response(media_type=MEDIA_TYPE)

        return [Route("/text/runs/{run_id}", stream_run, methods=["GET"])]


class TextStream(ResponseStream[str, list[Envelope]]):
    """One run's transcript, the body of ``GET /text/runs/{id}``: the loop that subscribes from
    the run's journal, projects each batch and writes it is the base class's."""

    def __init__(
        self, adapter: TextAdapter, service: RunService, run_id: str, policy: FollowPolicy
    ) -> None:
        projector = adapter.projector(ProjectorContext(run_id=run_id, thread_id=run_id))
        super().__init__(service, run_id, projector, policy, consumer=adapter.name)
        self.adapter = adapter

    def encode(self, messages: list[str]) -> bytes:
        return self.adapter.render(messages)


ADAPTER = TextAdapter()
