"""What a run hooks into the agent: its options, and the capability that asks the gateway for
approvals and times tool calls."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import (
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    ModelSettings,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolDenied,
    UsageLimits,
)
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model
from pydantic_ai.tools import RunContext as AgentContext

from ....contracts.loop import RunContext

ALLOWED = frozenset({"allow_once", "allow_always"})


@dataclass(frozen=True, kw_only=True)
class Options:
    agent: AbstractAgent[Any, Any]
    deps: Any
    deps_factory: Callable[[RunContext], Any] | None
    model: Model | str | None
    model_settings: ModelSettings | None
    usage_limits: UsageLimits | None
    client_tools: bool


@dataclass(eq=False)
class Bridge(AbstractCapability[Any]):
    """One run's hooks into the agent: approvals go to the gateway, tool calls are timed, and the
    call that raised is noted (pydantic-ai ends the run with the exception itself)."""

    loop_ctx: RunContext
    approval: str = "auto"
    durations: dict[str, float] = field(default_factory=dict)
    raised: tuple[str, str] | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # made per run, never part of an agent spec

    async def before_tool_execute(
        self, ctx: AgentContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        if self.approval == "always" and not ctx.tool_call_approved:
            raise ApprovalRequired
        return args

    async def wrap_tool_execute(
        self,
        ctx: AgentContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: Any,
    ) -> Any:
        started = time.perf_counter()
        try:
            return await handler(args)
        finally:
            self.durations[call.tool_call_id] = round((time.perf_counter() - started) * 1000, 3)

    async def on_tool_execute_error(
        self,
        ctx: AgentContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        error: Exception,
    ) -> Any:
        self.raised = (call.tool_call_id, call.tool_name)
        raise error

    async def handle_deferred_tool_calls(
        self, ctx: AgentContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        if not requests.approvals:
            return None  # external calls (client tools) end the turn
        approvals = {call.tool_call_id: await self._decide(call) for call in requests.approvals}
        return requests.build_results(approvals=approvals)

    async def _decide(self, call: ToolCallPart) -> ToolApproved | ToolDenied:
        if self.approval == "never":
            return ToolApproved()
        decision = await self.loop_ctx.ask_permission(
            {"id": call.tool_call_id, "name": call.tool_name, "arguments": call.args_as_dict()}
        )
        if decision in ALLOWED:
            return ToolApproved()
        return ToolDenied("The user rejected this tool call.")
