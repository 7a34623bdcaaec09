"""Runs whose events an external loop pushes (HTTP NDJSON, WebSocket, or the Python API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ...contracts.client_errors import ClientError
from ...contracts.ports import StartRun

if TYPE_CHECKING:
    from ..hub import Hub, Run

CommandSink = Callable[[dict[str, str]], None]


class IngestSource:
    def __init__(self, idle_timeout_s: float) -> None:
        self.idle_timeout_s = idle_timeout_s

    def prepare(self, request: StartRun) -> None:
        if request.input is not None:
            raise ClientError("an ingest run takes no input: its events come from your loop")

    def producer(self, hub: Hub, run: Run, prepared: None) -> IngestProducer:
        return IngestProducer(hub, run, self.idle_timeout_s)


class IngestProducer:
    """Stands in for the external loop: ends the run if it goes quiet, relays commands to it.

    A WebSocket ingest connection attaches a command sink so cancel and steer reach the
    external loop; without one, cancel ends the run here and steer is refused.
    """

    def __init__(self, hub: Hub, run: Run, idle_timeout_s: float) -> None:
        self.hub = hub
        self.run_ = run
        self.idle_timeout_s = idle_timeout_s
        self.commands: CommandSink | None = None

    async def run(self) -> None:
        run = self.run_
        while not run.finished:
            idle_ns = self.hub.clock() - run.last_push_ns
            remaining = self.idle_timeout_s - idle_ns / 1e9
            if remaining <= 0:
                self.hub.end_producer(run, "ingest_idle_timeout")
                return
            with anyio.move_on_after(remaining):
                await run.ended.wait()

    def _send(self, command: dict[str, str]) -> str | None:
        if self.commands is None:
            return "this run's external loop has no command channel (connect it over WebSocket)"
        try:
            self.commands(command)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return "the external loop is not taking commands right now"
        return None

    def cancel(self) -> None:
        self._send({"command": "cancel"})
        if not self.run_.finished:
            # The gateway cannot stop a loop it does not run; it ends the run for everyone
            # watching, and further pushes are refused.
            self.hub.publish(
                self.run_, "completion", {"status": "cancelled", "reason": "cancelled_by_client"}
            )

    def respond(self, request_id: str, decision: str) -> str | None:
        return "an external loop asks for permission itself; this run has no pending request"

    async def steer(self, content: str) -> str | None:
        return self._send({"command": "steer", "content": content})
