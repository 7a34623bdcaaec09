"""One turn of the reference loop: rounds until a terminal ``completion``, whatever happens.

A round is the boundary (:mod:`~loopgate.gateway.reference.boundary`), one model response
(:mod:`.model`), then a tool round (:mod:`.tool_round`) or the final
answer (:mod:`.answer`). ``Turn.run`` owns the outcome: cancellation, a failing
hook, the wrap-up hard cap and unexpected errors each still end in exactly one terminal
``completion``, with the output already streamed kept in history.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING

import anyio

from ...contracts.messages import Message
from .answer import final_answer
from .boundary import offered_tools, open_round
from .control import TurnControl
from .hook_runner import HookError, HookRunner
from .model import request_model
from .state import TurnState
from .tool_round import run_tool_round
from .types import EventSink

if TYPE_CHECKING:
    from .core import CoreLoop


class Turn:
    __slots__ = ("hooks", "state")

    def __init__(
        self, loop: CoreLoop, history: list[Message], emit: EventSink, control: TurnControl
    ) -> None:
        self.state = TurnState(loop, history, emit, control)
        self.hooks = HookRunner(self.state, loop.hooks)

    async def run(self) -> list[Message]:
        """Run the turn to its terminal ``completion``; returns the extended history."""
        turn = self.state
        scope = turn.scope
        turn.control.attach(scope)
        try:
            with scope:
                await self._rounds()
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (not via TurnControl): still close the turn, then unwind.
            with anyio.CancelScope(shield=True):
                turn.salvage()
                await turn.finish("cancelled", "cancelled")
            raise
        except HookError as exc:
            turn.salvage()
            await turn.emit("error", {"message": exc.message, "round": turn.round, "phase": "hook"})
            await turn.finish("failed", "hook_error")
        except BaseException:
            if not turn.done:
                with anyio.CancelScope(shield=True), suppress(Exception):
                    turn.salvage()
                    await turn.emit(
                        "error",
                        {"message": "internal error", "round": turn.round, "phase": "loop"},
                    )
                    await turn.finish("failed", "internal_error")
            raise
        finally:
            turn.control.detach(scope)
        if not turn.done:
            # Cancelled through TurnControl, or the wrap-up hard cap's deadline passed.
            turn.salvage()
            if turn.control.cancelled:
                await turn.finish("cancelled", "cancelled")
            else:
                await turn.finish("budget_exhausted", "wrap_up_hard_cap")
        return turn.history

    async def _rounds(self) -> None:
        turn = self.state
        hooks = self.hooks
        while True:
            turn.round += 1
            if await open_round(turn, hooks):
                return
            tools = offered_tools(turn)
            resp = await request_model(turn, hooks, tools)
            if resp is None:
                return
            calls = resp.calls
            if calls and not tools and turn.wrap_up:
                # The final wrap-up round offers no tools; a call anyway is not run.
                calls = []
            if calls:
                if await run_tool_round(turn, hooks, resp):
                    return
                continue
            if await final_answer(turn, hooks, resp):
                return
