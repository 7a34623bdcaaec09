"""One loopgate run of a pydantic-ai agent: ``agent.iter()`` driven node by node, its stream
turned into LoopEvents."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from pydantic import TypeAdapter
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    ExternalToolset,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelAPIError,
    ModelHTTPError,
    ModelResponse,
    ModelSettings,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
    UsageLimits,
)
from pydantic_ai.messages import ModelResponseStreamEvent
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRun

from ....contracts.contract import is_terminal_completion
from ....contracts.envelope import LoopEvent
from ....contracts.loop import RunContext
from .bridge import Bridge, Options
from .content import prompt
from .history import to_message_history
from .tally import Tally

log = logging.getLogger("loopgate.loop.pydantic_ai")

PREVIEW_CHARS = 300
# How long closing a run waits for pydantic-ai to tear down (close streams, cancel tools).
STOP_WAIT_S = 5.0
CLIENT_TOOLSET_ID = "loopgate_client_tools"
REJECTED = "rejected by the user"
_json = TypeAdapter(Any)


Event = tuple[str, dict[str, Any]]


class Turn:
    """One loopgate run: the agent runs in a task of its own and hands events over a stream."""

    def __init__(self, options: Options, ctx: RunContext) -> None:
        self.options = options
        self.ctx = ctx
        self.tally = Tally()
        self.bridge = Bridge(loop_ctx=ctx, approval=ctx.request.approval)
        self.model_name = _model_name(options.model or options.agent.model)
        self.client_names = {t["name"] for t in ctx.tools} if options.client_tools else set()
        self.persist = ctx.config.get("persist_tool_results") is True
        self.round = 0
        self.phase = "loop"
        self.steers: list[str] = []  # queued into the run, reported at the next round
        self.tool_round_open = False
        self.finished = False
        self._send: MemoryObjectSendStream[Event] | None = None

    async def events(self) -> AsyncGenerator[LoopEvent]:
        send, receive = anyio.create_memory_object_stream[Event]()
        self._send = send
        # A task, not a task group: a cancel scope must not span a yield, or it would fire in the
        # consumer's code. The task is also what pydantic-ai cancels to interrupt a model wait.
        producer = asyncio.create_task(self._produce(send))
        try:
            async for kind, data in receive:
                yield self.tally.event(kind, data)
                if is_terminal_completion(kind, data):
                    return
                if self.ctx.cancelled:
                    break
            if self.ctx.cancelled:
                yield self.tally.event("completion", {"status": "cancelled", "reason": "cancelled"})
            else:
                message = "the agent stopped without an answer"
                yield self.tally.event("error", {"message": message, "phase": "loop"})
                yield self.tally.event("completion", {"status": "failed", "reason": "agent_error"})
        finally:
            producer.cancel()
            with anyio.move_on_after(STOP_WAIT_S, shield=True):
                await asyncio.wait({producer})
            receive.close()
            if producer.done() and not producer.cancelled() and producer.exception() is not None:
                log.error(
                    "run %s: the agent crashed", self.ctx.run_id, exc_info=producer.exception()
                )

    async def _produce(self, send: MemoryObjectSendStream[Event]) -> None:
        async with send, anyio.create_task_group() as tg:
            tg.start_soon(self._stop_when_cancelled, tg.cancel_scope)
            await self._drive()
            tg.cancel_scope.cancel()

    async def _stop_when_cancelled(self, scope: anyio.CancelScope) -> None:
        await self.ctx.wait_cancelled()
        scope.cancel()

    async def _emit(self, kind: str, data: dict[str, Any]) -> None:
        assert self._send is not None
        await self._send.send((kind, data))

    # --- the run ------------------------------------------------------------------------------

    async def _drive(self) -> None:
        options, ctx = self.options, self.ctx
        try:
            async with options.agent.iter(
                prompt(ctx.input, ctx.input_parts),
                message_history=to_message_history(ctx.messages),
                deps=options.deps_factory(ctx) if options.deps_factory else options.deps,
                model=options.model,
                model_settings=_model_settings(options.model_settings, ctx.config),
                usage_limits=_usage_limits(options.usage_limits, ctx.config),
                toolsets=self._client_toolsets(),
                output_type=self._output_type(),
                capabilities=[self.bridge],
            ) as run:
                async for node in run:
                    if Agent.is_end_node(node):
                        await self._end(node.data.output)
                        break
                    if Agent.is_model_request_node(node):
                        self._queue_steers(run)
                        await self._model_request(run, node)
                    elif Agent.is_call_tools_node(node):
                        if not any(isinstance(p, ToolCallPart) for p in node.model_response.parts):
                            # The model just answered: pydantic-ai asks it again with these.
                            self._queue_steers(run)
                        await self._call_tools(run, node)
        except Exception as exc:
            if self.finished:
                log.warning(
                    "run %s: the agent raised after its turn ended", ctx.run_id, exc_info=exc
                )
            elif not ctx.cancelled:  # a cancelled run ends with completion{cancelled} instead
                log.error("run %s: the agent failed", ctx.run_id, exc_info=exc)
                await self._fail(exc)

    def _queue_steers(self, run: AgentRun[Any, Any]) -> None:
        """Steering applies at round boundaries. Not before a round's tool calls run: pydantic-ai
        would then interrupt calls waiting for the client instead of ending the turn."""
        for content in self.ctx.take_steers():
            run.enqueue(content)
            self.steers.append(content)

    async def _report_steers(self) -> None:
        for content in self.steers:
            await self._emit("steer", {"content": content, "round": self.round})
        self.steers.clear()

    async def _model_request(self, run: AgentRun[Any, Any], node: Any) -> None:
        if self.tool_round_open:
            self.tool_round_open = False
            await self._emit("completion", {"status": "executing", "reason": "tool_calls"})
        self.round += 1
        await self._report_steers()
        model = {"model": self.model_name} if self.model_name else {}
        await self._emit("stage_start", {**model, "round": self.round})
        await self._emit("llm_request", {"round": self.round, "attempt": 1, **model})
        self.phase = "llm_stream"
        async with node.stream(run.ctx) as stream:
            async for event in stream:
                await self._model_event(event)
        self.phase = "loop"
        await self._emit("llm_response", self._response_data(stream.response))

    async def _model_event(self, event: ModelResponseStreamEvent) -> None:
        if isinstance(event, PartStartEvent):
            part = event.part
            if isinstance(part, TextPart) and part.content:
                await self._emit("content_delta", {"delta": part.content})
            elif isinstance(part, ThinkingPart) and part.content:
                await self._emit("reasoning_delta", {"delta": part.content})
        elif isinstance(event, PartDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextPartDelta) and delta.content_delta:
                await self._emit("content_delta", {"delta": delta.content_delta})
            elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                await self._emit("reasoning_delta", {"delta": delta.content_delta})

    def _response_data(self, response: ModelResponse) -> dict[str, Any]:
        data: dict[str, Any] = {"round": self.round, "attempt": 1}
        if response.model_name:
            data["model"] = response.model_name
        data["finishReason"] = _finish_reason(response)
        usage = response.usage
        if usage.input_tokens or usage.output_tokens:
            data["promptTokens"] = usage.input_tokens
            data["completionTokens"] = usage.output_tokens
            data["totalTokens"] = usage.total_tokens
        if usage.output_reasoning_tokens:
            data["reasoningTokens"] = usage.output_reasoning_tokens
        return data

    async def _call_tools(self, run: AgentRun[Any, Any], node: Any) -> None:
        calls = 0
        self.phase = "tool"
        async with node.stream(run.ctx) as stream:
            async for event in stream:
                if isinstance(event, FunctionToolCallEvent):
                    calls += 1
                    part = event.part
                    await self._emit(
                        "tool_call_start",
                        {
                            "id": part.tool_call_id,
                            "name": part.tool_name,
                            "round": self.round,
                            "arguments": part.args_as_dict(),
                        },
                    )
                elif isinstance(event, FunctionToolResultEvent):
                    await self._emit("tool_call_result", self._result_data(event.part))
        self.phase = "loop"
        if calls:
            await self._emit("stage_complete", {"round": self.round})
            self.tool_round_open = True

    def _result_data(self, part: ToolReturnPart) -> dict[str, Any]:
        ok = part.outcome == "success"
        text = part.model_response_str(wrap_if_error=False)
        error = REJECTED if part.outcome == "denied" else text or part.outcome
        data: dict[str, Any] = {
            "id": part.tool_call_id,
            "name": part.tool_name,
            "success": ok,
            "durationMs": self.bridge.durations.pop(part.tool_call_id, 0.0),
            "resultPreview": _preview(text if ok else error),
        }
        if not ok:
            data["error"] = error
        if self.persist:
            data["result"] = _json.dump_python(part.content, mode="json")
        return data

    async def _end(self, output: Any) -> None:
        if isinstance(output, DeferredToolRequests):
            pending = [*output.calls, *output.approvals]
            names = {call.tool_name for call in pending}
            await self._finish(
                "waiting_user",
                "client_tool" if names <= self.client_names else "deferred_tool",
                pendingToolCallIds=[call.tool_call_id for call in pending],
            )
            return
        if not isinstance(output, str):
            await self._emit("content_delta", {"delta": _json.dump_json(output).decode()})
        await self._finish("completed", "stop")

    async def _fail(self, exc: Exception) -> None:
        if isinstance(exc, UsageLimitExceeded):
            if self.phase == "llm_stream":
                await self._emit(
                    "llm_response",
                    {"round": self.round, "attempt": 1, "error": "usage limit exceeded"},
                )
            await self._finish("budget_exhausted", "usage limit exceeded")
            return
        message, reason = _describe(exc), "agent_error"
        if self.phase == "llm_stream":
            reason = "provider_error"
            await self._emit("llm_response", {"round": self.round, "attempt": 1, "error": message})
        elif self.phase == "tool" and self.bridge.raised is not None:
            call_id, name = self.bridge.raised
            message, reason = f"the tool {name} failed", "tool_error"
            await self._emit(
                "tool_error",
                {"id": call_id, "name": name, "error": f"{name} failed with an internal error"},
            )
        where = {"round": self.round} if self.round else {}
        await self._emit("error", {"message": message, **where, "phase": self.phase})
        await self._finish("failed", reason)

    async def _finish(self, status: str, reason: str, **extra: Any) -> None:
        self.finished = True
        await self._emit("completion", {"status": status, "reason": reason, **extra})

    # --- per-run agent arguments --------------------------------------------------------------

    def _client_toolsets(self) -> list[ExternalToolset[Any]] | None:
        if not self.client_names:
            return None
        definitions = [
            ToolDefinition(
                name=tool["name"],
                description=tool.get("description") or None,
                parameters_json_schema=tool.get("parameters") or {"type": "object"},
            )
            for tool in self.ctx.tools
        ]
        return [ExternalToolset(definitions, id=CLIENT_TOOLSET_ID)]

    def _output_type(self) -> Any:
        """The agent's output type plus ``DeferredToolRequests`` when client tools may end the run;
        ``None`` keeps the agent's own."""
        if not self.client_names:
            return None
        spec = self.options.agent.output_type
        specs = list(spec) if isinstance(spec, Sequence) and not isinstance(spec, str) else [spec]
        return None if DeferredToolRequests in specs else [*specs, DeferredToolRequests]


def _model_settings(explicit: ModelSettings | None, config: Mapping[str, Any]) -> Any:
    settings: dict[str, Any] = {}
    temperature = config.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        settings["temperature"] = float(temperature)
    if type(config.get("max_tokens")) is int:
        settings["max_tokens"] = config["max_tokens"]
    settings.update(explicit or {})
    return settings or None


def _usage_limits(explicit: UsageLimits | None, config: Mapping[str, Any]) -> UsageLimits | None:
    if explicit is not None:
        return explicit
    # Only the limits the config sets: pydantic-ai's own defaults stand for the others.
    limits: dict[str, Any] = {}
    if type(config.get("max_rounds")) is int:
        limits["request_limit"] = config["max_rounds"]
    if type(config.get("budget")) is int:
        limits["total_tokens_limit"] = config["budget"]
    return UsageLimits(**limits) if limits else None


def _model_name(model: Model | str | None) -> str | None:
    if isinstance(model, Model):
        return model.model_name
    return model


def _finish_reason(response: ModelResponse) -> str:
    if response.finish_reason is not None:
        return "tool_calls" if response.finish_reason == "tool_call" else response.finish_reason
    return "tool_calls" if any(isinstance(p, ToolCallPart) for p in response.parts) else "stop"


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


def _describe(exc: Exception) -> str:
    """What clients read about a failure: its kind, never its text (that may hold internals)."""
    if isinstance(exc, ModelHTTPError):
        return f"the model request failed (HTTP {exc.status_code})"
    if isinstance(exc, ModelAPIError):
        return "the model request failed"
    if isinstance(exc, UnexpectedModelBehavior):
        return "the model answered in a way the agent could not use"
    return "the agent failed"
