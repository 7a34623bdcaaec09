"""The reference CoreLoop: model → deltas → tool calls → observations → next round.

One ``run_turn`` emits one LoopEvent stream that ends with exactly one terminal ``completion``
(status other than ``executing``), whatever happens: an answer, a limit, a provider failure,
a suspension, or cancellation from another task. This module is the loop's public face; a turn
itself is run by :class:`gateway.reference.turn.Turn`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...contracts.client_errors import ClientError
from ...contracts.loop import LOCAL_LOOP_PRINCIPAL, LoopPrincipal
from ...contracts.messages import Message, ToolSpec
from .config import LoopConfig
from .control import TurnControl
from .cost import Price
from .hooks import LoopHooks, NoHooks
from .resume import Resumed
from .turn import Turn
from .types import (
    EventSink,
    ModelProvider,
    PermissionGate,
    SpanScope,
    ToolExecutor,
    no_scope,
)


class CoreLoop:
    """Runs turns against a model provider and a tool executor under a ``LoopConfig``."""

    def __init__(
        self,
        provider: ModelProvider,
        executor: ToolExecutor,
        config: LoopConfig | None = None,
        hooks: LoopHooks | Sequence[LoopHooks] | None = None,
        permissions: PermissionGate | None = None,
        client_tools: Sequence[ToolSpec] = (),
        scope: SpanScope = no_scope,
        principal: LoopPrincipal = LOCAL_LOOP_PRINCIPAL,
        price: Price | None = None,
    ) -> None:
        self.provider = provider
        self.executor = executor
        self.config = config if config is not None else LoopConfig()
        # One hooks object, or several: their actions combine as ``hooks.COMPOSITION`` says.
        self.hooks: LoopHooks | Sequence[LoopHooks] = hooks if hooks is not None else NoHooks()
        self.permissions = permissions
        self.client_tools = list(client_tools)
        self.scope = scope
        # Who the turns run for: every LoopContext (tools, hooks) carries it.
        self.principal = principal
        # The provider's model's price: each response's usage then carries costUsd.
        self.price = price
        server_names = {spec.name for spec in executor.specs()}
        clash = sorted(server_names & {spec.name for spec in self.client_tools})
        if clash:
            raise ClientError(f"client tools clash with executor tools: {', '.join(clash)}")

    def tool_specs(self) -> list[ToolSpec]:
        return [*self.executor.specs(), *self.client_tools]

    async def run_turn(
        self,
        history: list[Message],
        emit: EventSink,
        control: TurnControl | None = None,
        resumed: Resumed | None = None,
    ) -> list[Message]:
        """Run one turn; returns the whole history with this turn's messages appended.
        ``resumed``: the turn goes on after the rounds an earlier attempt completed (their
        messages are in ``history`` already)."""
        if control is None:
            control = TurnControl(self.config.max_steer_chars, self.config.steer_mode)
        else:
            control.max_steer_chars = self.config.max_steer_chars
            control.steer_mode = self.config.steer_mode
        # Not an error: pyright also sees this file as loopgate.gateway.reference.core (loopgate/'s
        # symlink), whose CoreLoop Turn takes; mypy, which sees one module, checks this call.
        turn = Turn(self, list(history), emit, control)  # pyright: ignore[reportArgumentType]
        if resumed is not None:
            turn.state.round = resumed.rounds
            turn.state.tool_names = list(resumed.tool_names)
        return await turn.run()
