"""The reference CoreLoop behind the loop port: one implementation among others."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Protocol

from ...contracts.client_errors import client_message
from ...contracts.loop import Emit, LoopFault, LoopRequest, RunContext
from ...contracts.messages import Message, ToolCall
from ..reference.config import LoopConfig
from ..reference.control import TurnControl
from ..reference.core import CoreLoop
from ..reference.cost import Price
from ..reference.hooks import LoopHooks
from ..reference.resume import completed_rounds
from ..reference.types import (
    ModelProvider,
    PermissionDecision,
    SpanScope,
    ToolExecutor,
    no_scope,
)

log = logging.getLogger("loopgate.loop")


class ToolSet(ToolExecutor, Protocol):
    """A tool executor that also says what a front end needs to know about each tool."""

    def kind(self, name: str) -> str: ...

    def needs_approval(self, call: ToolCall) -> bool: ...


# Telemetry's span scope for a run's spans: (run id, span key) → context manager.
RunScope = Callable[[str, str], AbstractContextManager[None]]

# Opens the tools of one run (e.g. the thread's MCP servers next to the configured ones);
# ValueError or a LoopFault when they cannot be had.
ToolsFor = Callable[[LoopRequest], Awaitable[ToolSet]]


class ContextPermissionGate:
    """The CoreLoop's permission gate, asking through the run context. ``must_approve``: the
    operator's tools to approve (``hook_rules.approve_tools``), whatever the run's mode."""

    def __init__(
        self,
        ctx: RunContext,
        tools: ToolSet,
        mode: str,
        must_approve: Callable[[str], bool] | None = None,
    ) -> None:
        self.ctx = ctx
        self.tools = tools
        self.mode = mode
        self.must_approve = must_approve

    def needs_approval(self, call: ToolCall) -> bool:
        if self.must_approve is not None and self.must_approve(call.name):
            return True
        if self.mode == "never":
            return False
        return self.mode == "always" or self.tools.needs_approval(call)

    async def decide(self, call: ToolCall) -> PermissionDecision:
        decision = await self.ctx.ask_permission(
            {
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "kind": self.tools.kind(call.name),
            }
        )
        return "allow" if decision.startswith("allow") else "reject"


class ReferenceLoop:
    """Implements :class:`contracts.loop.AgentLoop` with the gateway's own CoreLoop."""

    name = "reference"
    untrusted = False
    # A run goes on from its last completed round on another instance (gateway.reference.resume).
    resumable = True
    # Every attachment kind: the model takes what it can, the rest is named (openai_wire).
    accepts: frozenset[str] | None = None

    def __init__(
        self,
        provider: ModelProvider,
        tools_for: ToolsFor,
        *,
        system_prompt: str | None = None,
        start: Callable[[], Awaitable[None]] | None = None,
        close: Callable[[], Awaitable[None]] | None = None,
        release_thread: Callable[[str], Awaitable[None]] | None = None,
        scope: RunScope | None = None,
        hooks: Sequence[LoopHooks] = (),
        must_approve: Callable[[str], bool] | None = None,
        price: Price | None = None,
    ) -> None:
        self.provider = provider
        self.tools_for = tools_for
        # The operator's hooks (--hooks, [hook_rules]): every run's, in this order.
        self.hooks = list(hooks)
        self.must_approve = must_approve
        self.price = price
        self.system_prompt = system_prompt
        self._start = start
        self._close = close
        self._release = release_thread
        self.scope = scope

    async def start(self) -> None:
        if self._start is not None:
            await self._start()

    async def aclose(self) -> None:
        if self._close is not None:
            await self._close()

    async def release_thread(self, thread_id: str) -> None:
        """The thread's client is gone: close what its runs held (its MCP servers)."""
        if self._release is not None:
            await self._release(thread_id)

    def check(self, request: LoopRequest) -> None:
        LoopConfig.from_dict(request.config)

    def open(self, ctx: RunContext) -> ReferenceRun:
        return ReferenceRun(self, ctx)


class ReferenceRun:
    def __init__(self, loop: ReferenceLoop, ctx: RunContext) -> None:
        self.loop = loop
        self.ctx = ctx
        self.config = LoopConfig.from_dict(ctx.config)
        unknown = LoopConfig.unknown_keys(ctx.config)
        if unknown:
            # Another engine's keys (a client configuring several loops): not refused, said once.
            log.info(
                "run %s: loop config keys %s are not the reference loop's; ignored",
                ctx.run_id,
                ", ".join(map(repr, unknown)),
            )
        self.control = TurnControl(self.config.max_steer_chars)

    async def run(self, emit: Emit) -> None:
        request = self.ctx.request
        tools = await self.loop.tools_for(request)
        history = list(request.messages)
        if self.loop.system_prompt:
            history.insert(0, Message(role="system", content=self.loop.system_prompt))
        if request.input_parts:
            history.append(Message(role="user", content=list(request.input_parts)))
        elif request.input:
            history.append(Message(role="user", content=request.input))
        run_scope = self.loop.scope
        scope: SpanScope = no_scope if run_scope is None else partial(run_scope, request.run_id)
        try:
            core = CoreLoop(
                self.loop.provider,
                tools,
                config=self.config,
                hooks=self.loop.hooks,
                permissions=ContextPermissionGate(
                    self.ctx, tools, request.approval, self.loop.must_approve
                ),
                price=self.loop.price,
                client_tools=request.tools,
                scope=scope,
                principal=request.principal,
            )
        except ValueError as exc:  # client tools named like the loop's own: our own words
            message = client_message(exc) or "the run's tools could not be set up"
            raise LoopFault("invalid_request", message) from None

        async def sink(kind: str, data: dict[str, Any]) -> None:
            emit(kind, data)

        # A new attempt goes on after the last round the attempts before it completed.
        resumed = completed_rounds(request.events) if request.attempt > 1 else None
        if resumed is not None:
            history += resumed.messages
        await core.run_turn(history, sink, self.control, resumed)

    def cancel(self) -> None:
        self.control.cancel()

    async def steer(self, content: str) -> str | None:
        self.control.steer(content)
        return None
