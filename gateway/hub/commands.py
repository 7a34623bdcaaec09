"""Commands to a running run's producer (cancel, steer, an answer to a permission request):
applied here when the run is produced here, sent to its owner when another instance's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...contracts.ports import CommandResult
from ..identity.audit import audit
from . import access
from .run import Producer

if TYPE_CHECKING:
    from .hub import Hub


class Commands:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    async def cancel(self, run_id: str) -> CommandResult:
        async def cancel(producer: Producer) -> str | None:
            producer.cancel()
            return None

        return await self._send(
            run_id, "cancel", cancel, "cancellation requested", {"verb": "cancel"}
        )

    async def steer(self, run_id: str, content: str) -> CommandResult:
        return await self._send(
            run_id,
            "steer",
            lambda producer: producer.steer(content),
            "steering message delivered; the loop applies it at its next step",
            {"verb": "steer", "content": content},
        )

    async def respond(self, run_id: str, request_id: str, decision: str) -> CommandResult:
        async def answer(producer: Producer) -> str | None:
            return producer.respond(request_id, decision)

        return await self._send(
            run_id,
            "answer",
            answer,
            f"{decision} recorded",
            {"verb": "respond", "request_id": request_id, "decision": decision},
        )

    async def _send(
        self,
        run_id: str,
        verb: str,
        apply: Callable[[Producer], Awaitable[str | None]],
        accepted: str,
        remote: dict[str, Any],
    ) -> CommandResult:
        """A command to a live run's producer; on a finished run it is a no-op, not an error.

        ``apply`` returns a refusal (a reason) or None when the producer took the command;
        ``remote`` is the command as sent to the instance that owns a remote run.
        """
        hub = self.hub
        run = await hub.load(run_id)
        principal = access.check_run(run_id, run.record.owner, control=True)
        audit(f"run_{verb}", principal, run_id=run_id)
        if run.remote and verb == "cancel" and hub.shared is not None:
            # Waiting in the shared queue: it ends there (None: a worker has it now).
            ended = await hub.shared.cancel(run)
            if ended is not None:
                return ended
        if run.remote and not run.finished and hub.remote is not None:
            return await hub.remote.command(run, verb, remote)
        if run.finished or run.producer is None:
            detail = f"run already finished ({run.record.status}); nothing to {verb}"
            return CommandResult(run_id=run_id, accepted=False, detail=detail)
        refusal = await apply(run.producer)
        return CommandResult(run_id=run_id, accepted=refusal is None, detail=refusal or accepted)
