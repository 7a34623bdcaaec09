"""The reference CoreLoop: model → deltas → tool calls → observations → next round.

One ``run_turn`` emits one LoopEvent stream that ends with exactly one terminal ``completion``
(status other than ``executing``), whatever happens: an answer, a limit, a provider failure,
a suspension, or cancellation from another task.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

import anyio
import msgspec

from contracts import json_input
from contracts.client_errors import ClientError, describe_input_error
from contracts.messages import Message, ToolCall, ToolSpec
from gateway.loop.config import LoopConfig
from gateway.loop.control import TurnControl
from gateway.loop.hooks import (
    ALLOWED_ACTIONS,
    Action,
    Fail,
    LoopHooks,
    Narrate,
    NoHooks,
    Reject,
    Retry,
    RoundSummary,
    Stop,
    Suspend,
)
from gateway.loop.types import (
    EventSink,
    FinishChunk,
    LoopContext,
    ModelProvider,
    ModelRequest,
    PermissionGate,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolExecutor,
    ToolResult,
    UsageChunk,
)

PREVIEW_CHARS = 300
NARRATE_CHUNK = 24
GENERIC_ERROR = "model request failed"
WRAP_UP_NUDGE = (
    "Time is almost up. Wrap up now: give your best final answer with what you already know"
    " ({rounds} more tool round(s) at most)."
)

_args_decoder = msgspec.json.Decoder()
_canonical = msgspec.json.Encoder(order="sorted")


class CoreLoop:
    """Runs turns against a model provider and a tool executor under a ``LoopConfig``."""

    def __init__(
        self,
        provider: ModelProvider,
        executor: ToolExecutor,
        config: LoopConfig | None = None,
        hooks: LoopHooks | None = None,
        permissions: PermissionGate | None = None,
        client_tools: Sequence[ToolSpec] = (),
    ) -> None:
        self.provider = provider
        self.executor = executor
        self.config = config if config is not None else LoopConfig()
        self.hooks: LoopHooks = hooks if hooks is not None else NoHooks()
        self.permissions = permissions
        self.client_tools = list(client_tools)
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
    ) -> list[Message]:
        """Run one turn; returns the whole history with this turn's messages appended."""
        if control is None:
            control = TurnControl(self.config.max_steer_chars)
        else:
            control.max_steer_chars = self.config.max_steer_chars
        return await _Turn(self, list(history), emit, control).run()


class _HookError(Exception):
    def __init__(self, hook: str, detail: str) -> None:
        self.message = f"hook {hook} {detail}"
        super().__init__(self.message)
        self.hook = hook


class _ModelFailure(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__("model failure")
        self.cause = cause


class _Parsed(msgspec.Struct):
    call: ToolCall
    error: str | None = None
    raw: str = ""


class _Response(msgspec.Struct):
    text: str
    reasoning: str
    calls: list[_Parsed]
    finish: str | None


class _Slot:
    """One tool call of a round: its outcome, filled in when it is ready to be emitted."""

    __slots__ = ("alias", "call", "deduped", "duration_ms", "key", "raised", "ready", "result")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.result: ToolResult | None = None
        self.raised = False
        self.deduped = False
        self.duration_ms = 0.0
        self.key = ""
        self.alias: _Slot | None = None
        self.ready = anyio.Event()

    def done(self, result: ToolResult) -> None:
        self.result = result
        self.ready.set()


class _Turn:
    def __init__(
        self, loop: CoreLoop, history: list[Message], emit: EventSink, control: TurnControl
    ) -> None:
        self.loop = loop
        self.cfg = loop.config
        self.history = history
        self.emit = emit
        self.control = control
        self.started = time.perf_counter()
        self.round = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.consecutive_errors = 0
        self.tool_error_count = 0
        self.tool_names: list[str] = []
        self.text_length = 0
        self.finish_reason: str | None = None
        self.done = False
        self.dedup: dict[str, ToolResult] = {}
        self.wrap_up = False
        self.wrap_up_tool_rounds = 0
        self.scope = anyio.CancelScope()
        # In-flight output, so a cancel keeps what the user already saw.
        self.live_text: list[str] = []
        self.live_reasoning: list[str] = []
        self.open_calls: dict[str, ToolCall] = {}
        self.client_names = {spec.name for spec in loop.client_tools}
        self.server_names = {spec.name for spec in loop.executor.specs()}
        hooks_type = type(loop.hooks)
        self.observe_chunks = getattr(hooks_type, "on_stream_chunk", None) is not (
            NoHooks.on_stream_chunk
        )

    # --- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> list[Message]:
        scope = self.scope
        self.control.attach(scope)
        try:
            with scope:
                await self._rounds()
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (not via TurnControl): still close the turn, then unwind.
            with anyio.CancelScope(shield=True):
                self._salvage()
                await self._finish("cancelled", "cancelled")
            raise
        except _HookError as exc:
            self._salvage()
            await self.emit("error", {"message": exc.message, "round": self.round, "phase": "hook"})
            await self._finish("failed", "hook_error")
        except BaseException:
            if not self.done:
                with anyio.CancelScope(shield=True), suppress(Exception):
                    self._salvage()
                    await self.emit(
                        "error",
                        {"message": "internal error", "round": self.round, "phase": "loop"},
                    )
                    await self._finish("failed", "internal_error")
            raise
        finally:
            self.control.detach(scope)
        if not self.done:
            self._salvage()
            if self.control.cancelled:
                await self._finish("cancelled", "cancelled")
            else:
                await self._finish("budget_exhausted", "wrap_up_hard_cap")
        return self.history

    def _salvage(self) -> None:
        """Keep streamed-but-unfinished output in history and close tool calls left open."""
        if self.live_text or self.live_reasoning:
            self.text_length += sum(map(len, self.live_text))
            self.history.append(
                Message(
                    role="assistant",
                    content="".join(self.live_text),
                    reasoning="".join(self.live_reasoning) or None,
                )
            )
            self.live_text.clear()
            self.live_reasoning.clear()
        for call_id, call in self.open_calls.items():
            self.history.append(
                Message(
                    role="tool",
                    tool_call_id=call_id,
                    name=call.name,
                    content="Error: cancelled before the tool finished",
                )
            )
        self.open_calls.clear()

    async def _finish(self, status: str, reason: str, **extra: Any) -> None:
        self.done = True
        data = self._summary(status, reason)
        data["promptTokens"] = self.prompt_tokens
        data["completionTokens"] = self.completion_tokens
        data["elapsedMs"] = self._elapsed_ms()
        if data["finishReason"] is None:
            del data["finishReason"]
        data.update(extra)
        await self.emit("completion", data)

    def _elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)

    def _ctx(self) -> LoopContext:
        return LoopContext(
            round=self.round,
            elapsed_ms=self._elapsed_ms(),
            history=self.history,
            consecutive_tool_errors=self.consecutive_errors,
            tokens_used=self.prompt_tokens + self.completion_tokens,
        )

    # --- hooks --------------------------------------------------------------------------------

    async def _hook(self, name: str, *args: Any) -> Any:
        fn = getattr(self.loop.hooks, name, None)
        if fn is None:
            return None
        try:
            out = fn(self._ctx(), *args)
            if inspect.isawaitable(out):
                out = await out
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            raise _HookError(name, "raised an exception") from None
        if out is None or name not in ALLOWED_ACTIONS:
            return None
        if not isinstance(out, ALLOWED_ACTIONS[name]):
            raise _HookError(name, f"returned an unsupported action {type(out).__name__}")
        return out

    async def _hook_action(self, hook: str, action: Action, reason: str = "", **extra: Any) -> None:
        data: dict[str, Any] = {
            "hook": hook,
            "action": action.name,
            "reason": getattr(action, "reason", "") or reason,
            "round": self.round,
        }
        data.update(extra)
        await self.emit("hook_action", data)

    # --- rounds -------------------------------------------------------------------------------

    async def _rounds(self) -> None:
        while True:
            self.round += 1
            if await self._boundary():
                return
            tools = self._offered_tools()
            resp = await self._model_call(tools)
            if resp is None:
                return
            calls = resp.calls
            if calls and not tools and self.wrap_up:
                # The final wrap-up round offers no tools; a call anyway is not run.
                calls = []
            if calls:
                if await self._tool_round(resp):
                    return
                continue
            if await self._final_answer(resp):
                return

    async def _boundary(self) -> bool:
        """Round-boundary work: steering, limits, soft timeout, ``pre_step``. True = turn over."""
        cfg = self.cfg
        if self.control.cancelled:
            # A cancel that raced ahead of any checkpoint; the caller sees completion{cancelled}.
            return True
        for text in self.control.take_steers():
            self.history.append(Message(role="user", content=text))
            await self.emit("steer", {"content": text, "round": self.round})
        used = self.prompt_tokens + self.completion_tokens
        if cfg.budget is not None and used >= cfg.budget:
            await self.emit(
                "budget_exhausted", {"kind": "tokens", "used": used, "budget": cfg.budget}
            )
            await self._finish("budget_exhausted", "token budget exhausted")
            return True
        if self.round > cfg.max_rounds:
            self.round = cfg.max_rounds
            await self.emit("budget_exhausted", {"kind": "rounds", "rounds": cfg.max_rounds})
            await self._finish("budget_exhausted", "max_rounds reached")
            return True
        if cfg.soft_timeout_ms is not None and not self.wrap_up:
            elapsed = self._elapsed_ms()
            if elapsed >= cfg.soft_timeout_ms:
                await self._start_wrap_up(elapsed)
        action = await self._hook("pre_step")
        if action is not None:
            await self._hook_action("pre_step", action)
            if isinstance(action, Reject):
                await self._finish("failed", f"rejected by pre_step: {action.reason}".rstrip(": "))
                return True
        await self.emit("stage_start", {"model": self.loop.provider.model, "round": self.round})
        return False

    async def _start_wrap_up(self, elapsed: float) -> None:
        cfg = self.cfg
        self.wrap_up = True
        await self.emit(
            "soft_timeout",
            {"round": self.round, "elapsedMs": elapsed, "softTimeoutMs": cfg.soft_timeout_ms},
        )
        nudge = WRAP_UP_NUDGE.format(rounds=cfg.wrap_up_max_tool_rounds)
        self.history.append(Message(role="system", content=nudge))
        if cfg.wrap_up_hard_cap_ms is not None:
            # The turn's own scope gets a deadline; hitting it ends the turn as budget_exhausted.
            self.scope.deadline = anyio.current_time() + cfg.wrap_up_hard_cap_ms / 1000

    def _offered_tools(self) -> list[ToolSpec]:
        if self.wrap_up and self.wrap_up_tool_rounds >= self.cfg.wrap_up_max_tool_rounds:
            return []
        return self.loop.tool_specs()

    async def _final_answer(self, resp: _Response) -> bool:
        text = resp.text
        assistant = Message(role="assistant", content=text, reasoning=resp.reasoning or None)
        if self.control.pending_steers:
            # The user steered while the model was answering: answer the steering, too.
            self.history.append(assistant)
            return False
        action = await self._hook("before_completion", text)
        if isinstance(action, Retry):
            await self._hook_action("before_completion", action, "nudge", value=action.message)
            self.history.append(assistant)
            self.history.append(Message(role="user", content=action.message))
            return False
        if isinstance(action, Narrate):
            await self._hook_action("before_completion", action, "narrate", value=action.text)
            for i in range(0, len(action.text), NARRATE_CHUNK):
                await self.emit("content_delta", {"delta": action.text[i : i + NARRATE_CHUNK]})
            text += action.text
            self.text_length += len(action.text)
            assistant.content = text
        elif action is not None:
            await self._hook_action("before_completion", action)
        self.history.append(assistant)
        await self._finish("completed", self.finish_reason or "stop")
        return True

    # --- the model ----------------------------------------------------------------------------

    async def _model_call(self, tools: list[ToolSpec]) -> _Response | None:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._stream(tools, attempt)
            except _ModelFailure as failure:
                cause = failure.cause
                # Only ProviderError text is written for clients; anything else may leak internals.
                message = cause.message if isinstance(cause, ProviderError) else GENERIC_ERROR
                await self.emit(
                    "llm_response", {"round": self.round, "attempt": attempt, "error": message}
                )
                action = await self._hook("on_request_error", cause, attempt)
                if isinstance(action, Retry):
                    delay = max(0, action.delay_ms)
                    await self._hook_action("on_request_error", action, message, delayMs=delay)
                    self.live_text.clear()
                    self.live_reasoning.clear()
                    await anyio.sleep(delay / 1000)
                    continue
                if isinstance(action, Fail):
                    await self._hook_action("on_request_error", action, message)
                self._salvage()
                await self.emit(
                    "error", {"message": message, "round": self.round, "phase": "llm_stream"}
                )
                await self._finish("failed", "provider_error")
                return None

    async def _stream(self, tools: list[ToolSpec], attempt: int) -> _Response:
        cfg = self.cfg
        emit = self.emit
        await emit(
            "llm_request",
            {"round": self.round, "attempt": attempt, "model": self.loop.provider.model},
        )
        request = ModelRequest(
            messages=list(self.history),
            tools=tools,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
        )
        text = self.live_text
        reasoning = self.live_reasoning
        builders: dict[int, list[Any]] = {}  # index → [id, name, [argument fragments]]
        usage: UsageChunk | None = None
        finish: str | None = None
        idle_s = None if cfg.idle_stream_timeout_ms is None else cfg.idle_stream_timeout_ms / 1000
        reasoning_limit = cfg.reasoning_without_progress_chars
        reasoning_run = 0
        try:
            stream = aiter(self.loop.provider.stream(request))
        except Exception as exc:
            raise _ModelFailure(exc) from None
        try:
            while True:
                try:
                    if idle_s is None:
                        chunk = await anext(stream)
                    else:
                        chunk = None
                        with anyio.move_on_after(idle_s) as idle:
                            chunk = await anext(stream)
                        if idle.cancelled_caught:
                            raise _ModelFailure(
                                ProviderError(
                                    f"model stream idle for more than "
                                    f"{cfg.idle_stream_timeout_ms} ms",
                                    retryable=True,
                                )
                            )
                except StopAsyncIteration:
                    break
                except (_ModelFailure, anyio.get_cancelled_exc_class()):
                    raise
                except Exception as exc:
                    raise _ModelFailure(exc) from None
                if self.observe_chunks:
                    await self._hook("on_stream_chunk", chunk)
                kind = type(chunk)
                if kind is TextChunk:
                    if chunk.delta:
                        text.append(chunk.delta)
                        reasoning_run = 0
                        await emit("content_delta", {"delta": chunk.delta})
                elif kind is ReasoningChunk:
                    if chunk.delta:
                        reasoning.append(chunk.delta)
                        reasoning_run += len(chunk.delta)
                        await emit("reasoning_delta", {"delta": chunk.delta})
                        if reasoning_limit is not None and reasoning_run > reasoning_limit:
                            raise _ModelFailure(
                                ProviderError(
                                    f"reasoning exceeded {reasoning_limit} characters"
                                    " without text or a tool call"
                                )
                            )
                elif kind is ToolCallChunk:
                    reasoning_run = 0
                    b = builders.get(chunk.index)
                    if b is None:
                        b = builders[chunk.index] = [None, None, []]
                    if chunk.id:
                        b[0] = chunk.id
                    if chunk.name:
                        b[1] = chunk.name
                    if chunk.arguments:
                        b[2].append(chunk.arguments)
                elif kind is UsageChunk:
                    usage = chunk
                elif kind is FinishChunk:
                    finish = chunk.reason
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with anyio.move_on_after(1.0, shield=True), suppress(Exception):
                    await aclose()

        response = _Response(
            text="".join(text),
            reasoning="".join(reasoning),
            calls=[self._parse_call(i, b) for i, b in sorted(builders.items())],
            finish=finish,
        )
        text.clear()
        reasoning.clear()
        self.text_length += len(response.text)
        self.finish_reason = finish or ("tool_calls" if response.calls else "stop")
        data: dict[str, Any] = {
            "round": self.round,
            "attempt": attempt,
            "model": self.loop.provider.model,
            "finishReason": self.finish_reason,
        }
        if usage is not None:
            self.prompt_tokens += usage.prompt_tokens or 0
            self.completion_tokens += usage.completion_tokens or 0
            for key, value in (
                ("promptTokens", usage.prompt_tokens),
                ("completionTokens", usage.completion_tokens),
                ("totalTokens", usage.total_tokens),
                ("reasoningTokens", usage.reasoning_tokens),
            ):
                if value is not None:
                    data[key] = value
        await emit("llm_response", data)
        return response

    def _parse_call(self, index: int, builder: list[Any]) -> _Parsed:
        call_id = builder[0] or f"call_{self.round}_{index}"
        name = builder[1] or ""
        raw = "".join(builder[2])
        error: str | None = None
        arguments: dict[str, Any] = {}
        if not name:
            error = "the tool call has no name"
        else:
            try:
                # A model's output, bounded like a client's input.
                decoded = json_input.decode(raw, decoder=_args_decoder) if raw.strip() else {}
            except msgspec.DecodeError as exc:
                error = f"invalid JSON arguments: {describe_input_error(exc, root='arguments')}"
            else:
                if isinstance(decoded, dict):
                    arguments = decoded
                else:
                    error = "tool arguments must be a JSON object"
        return _Parsed(ToolCall(id=call_id, name=name, arguments=arguments), error, raw)

    # --- tools --------------------------------------------------------------------------------

    async def _tool_round(self, resp: _Response) -> bool:
        """Run one round of tool calls. True = the turn is over."""
        parsed = resp.calls
        self.history.append(
            Message(
                role="assistant",
                content=resp.text,
                reasoning=resp.reasoning or None,
                tool_calls=[p.call for p in parsed],
            )
        )
        for p in parsed:
            self.open_calls[p.call.id] = p.call
            data: dict[str, Any] = {
                "id": p.call.id,
                "name": p.call.name,
                "round": self.round,
                "arguments": p.call.arguments,
            }
            if p.error is not None:
                data["rawArguments"] = p.raw
            await self.emit("tool_call_start", data)
        self.tool_names.extend(p.call.name for p in parsed)

        pending = [
            p.call.id for p in parsed if p.error is None and p.call.name in self.client_names
        ]
        server = [p for p in parsed if p.call.id not in pending]
        round_failed, deduped, suspend = await self._run_tools(server)

        await self.emit(
            "stage_complete",
            {
                "round": self.round,
                "toolCallCount": len(parsed),
                "consecutiveToolErrors": self.consecutive_errors,
                "elapsedMs": self._elapsed_ms(),
                "promptTokens": self.prompt_tokens,
                "completionTokens": self.completion_tokens,
            },
        )
        if pending:
            await self._finish("waiting_user", "client_tool", pendingToolCallIds=pending)
            return True
        if suspend is not None:
            await self._finish("waiting_user", suspend[1], toolCallId=suspend[0])
            return True
        if self.consecutive_errors >= self.cfg.max_tool_errors:
            await self._finish(
                "failed",
                f"too many consecutive tool errors ({self.consecutive_errors}; "
                f"max_tool_errors={self.cfg.max_tool_errors})",
            )
            return True
        summary = RoundSummary(
            round=self.round,
            tool_names=[p.call.name for p in parsed],
            tool_call_count=len(parsed),
            failed_count=round_failed,
            deduplicated_count=deduped,
            consecutive_tool_errors=self.consecutive_errors,
            text_length=len(resp.text),
        )
        action = await self._hook("tool_made_progress", summary)
        if action is not None:
            await self._hook_action("tool_made_progress", action)
            if isinstance(action, Stop):
                await self._finish("failed", f"stopped: {action.reason}".rstrip(": "))
                return True
        if self.wrap_up:
            self.wrap_up_tool_rounds += 1
        await self._finish_round()
        return False

    async def _finish_round(self) -> None:
        await self.emit("completion", self._summary("executing", "tool_calls"))

    def _summary(self, status: str, reason: str) -> dict[str, Any]:
        """A ``completion`` payload: the turn's (or, while executing, the round's) counts."""
        return {
            "status": status,
            "reason": reason,
            "round": self.round,
            "finishReason": self.finish_reason,
            "textLength": self.text_length,
            "toolCalls": list(self.tool_names),
            "toolCallCount": len(self.tool_names),
            "toolErrorCount": self.tool_error_count,
        }

    async def _run_tools(self, parsed: list[_Parsed]) -> tuple[int, int, tuple[str, str] | None]:
        """Resolve, run and report ``parsed`` in call order; returns (failed, deduped, suspend)."""
        slots = [_Slot(p.call) for p in parsed]
        to_run: list[_Slot] = []
        seen: dict[str, _Slot] = {}
        for p, slot in zip(parsed, slots, strict=True):
            call = p.call
            if p.error is not None:
                slot.done(ToolResult(success=False, error=p.error))
                continue
            if call.name not in self.server_names:
                slot.done(ToolResult(success=False, error=f"unknown tool {call.name!r}"))
                continue
            if self.cfg.tool_dedup:
                slot.key = call.name + "\x00" + _canonical.encode(call.arguments).decode()
                earlier = self.dedup.get(slot.key)
                if earlier is not None:
                    slot.deduped = True
                    slot.done(earlier)
                    continue
                twin = seen.get(slot.key)
                if twin is not None:
                    slot.deduped = True
                    slot.alias = twin
                    continue
                seen[slot.key] = slot
            gate = self.loop.permissions
            if gate is not None and gate.needs_approval(call):
                decision = await gate.decide(call)
                if decision != "allow":
                    slot.done(ToolResult(success=False, error="rejected by the user"))
                    continue
            to_run.append(slot)

        failed = deduped = 0
        suspend: tuple[str, str] | None = None
        problem: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._execute_all, to_run)
            try:
                for slot in slots:
                    if slot.alias is not None:
                        await slot.alias.ready.wait()
                        assert slot.alias.result is not None
                        slot.done(slot.alias.result)
                    await slot.ready.wait()
                    result = slot.result
                    assert result is not None
                    await self._report(slot, result)
                    failed += not result.success
                    deduped += slot.deduped
                    if result.suspend and suspend is None:
                        suspend = (slot.call.id, _suspend_reason(result))
                    action = await self._hook("post_tool_result", slot.call, result)
                    if action is not None:
                        await self._hook_action("post_tool_result", action)
                        if isinstance(action, Suspend) and suspend is None:
                            suspend = (slot.call.id, action.reason or "suspended by hook")
            except Exception as exc:
                # Hook or sink failure: stop the tools, re-raise outside the task group so the
                # caller sees the exception itself rather than an ExceptionGroup.
                problem = exc
                tg.cancel_scope.cancel()
        if problem is not None:
            raise problem
        return failed, deduped, suspend

    async def _execute_all(self, slots: list[_Slot]) -> None:
        """Run calls sequentially, letting consecutive concurrency-safe calls overlap."""
        batch: list[_Slot] = []
        parallel = self.cfg.parallel_tools
        for slot in slots:
            if parallel and self._safe(slot.call):
                batch.append(slot)
                continue
            await self._execute_batch(batch)
            batch = []
            await self._execute(slot)
        await self._execute_batch(batch)

    def _safe(self, call: ToolCall) -> bool:
        check = getattr(self.loop.executor, "concurrency_safe", None)
        if check is None:
            return False
        try:
            return bool(check(call))
        except Exception:
            return False

    async def _execute_batch(self, batch: list[_Slot]) -> None:
        if len(batch) == 1:
            await self._execute(batch[0])
        elif batch:
            async with anyio.create_task_group() as tg:
                for slot in batch:
                    tg.start_soon(self._execute, slot)

    async def _execute(self, slot: _Slot) -> None:
        call = slot.call
        timeout_ms = self.cfg.tool_timeout_ms
        t0 = time.perf_counter()
        result: ToolResult
        try:
            with anyio.move_on_after(timeout_ms / 1000) as scope:
                result = await self.loop.executor.execute(call, self._ctx())
            if scope.cancelled_caught:
                result = ToolResult(success=False, error=f"timed out after {timeout_ms} ms")
            elif not isinstance(result, ToolResult):
                slot.raised = True
                result = ToolResult(success=False, error=f"{call.name} returned an invalid result")
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            # Exception text from inside a tool may leak internals; the client gets a summary.
            slot.raised = True
            result = ToolResult(success=False, error=f"{call.name} failed with an internal error")
        slot.duration_ms = round((time.perf_counter() - t0) * 1000, 3)
        if slot.key and not result.suspend:
            self.dedup[slot.key] = result
        slot.done(result)

    async def _report(self, slot: _Slot, result: ToolResult) -> None:
        call = slot.call
        if result.success:
            self.consecutive_errors = 0
        else:
            self.consecutive_errors += 1
            self.tool_error_count += 1
        if slot.raised:
            await self.emit(
                "tool_error", {"id": call.id, "name": call.name, "error": result.error or ""}
            )
        else:
            source = result.content or result.error or ""
            preview = source if len(source) <= PREVIEW_CHARS else source[:PREVIEW_CHARS] + "…"
            data: dict[str, Any] = {
                "id": call.id,
                "name": call.name,
                "success": result.success,
                "durationMs": 0.0 if slot.deduped else slot.duration_ms,
                "resultPreview": preview,
            }
            if result.error is not None:
                data["error"] = result.error
            if self.cfg.persist_tool_results:
                data["result"] = result.data if result.data is not None else result.content
            if slot.deduped:
                data["deduplicated"] = True
            await self.emit("tool_call_result", data)
        self.open_calls.pop(call.id, None)
        self.history.append(
            Message(role="tool", tool_call_id=call.id, name=call.name, content=_observation(result))
        )


def _observation(result: ToolResult) -> str:
    if result.success:
        return result.content
    error = f"Error: {result.error or 'the tool failed'}"
    return f"{error}\n{result.content}" if result.content else error


def _suspend_reason(result: ToolResult) -> str:
    if isinstance(result.data, dict) and isinstance(result.data.get("reason"), str):
        return result.data["reason"]
    return "tool_suspended"
