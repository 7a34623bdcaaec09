"""Streaming one model response: deltas out as events, text, reasoning and tool calls assembled.

:func:`stream_response` is the one place the model provider is called. Text and reasoning go
into the turn's live buffers as they stream (so a cancel keeps them), tool-call fragments are
joined by index, and the stream is bounded by the idle timeout, by how much reasoning may
stream without text or a tool call, and by how much of either without a tool call.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import Any

import anyio
import msgspec

from ...contracts import json_input
from ...contracts.client_errors import describe_input_error
from ...contracts.messages import ToolCall
from .hook_runner import HookRunner
from .state import TurnState
from .types import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

_args_decoder = msgspec.json.Decoder()

ChunkReader = Callable[[AsyncIterator[ModelChunk]], Awaitable[ModelChunk]]


class ModelFailure(Exception):
    """A model request failed (``cause``): the provider raised, or a stream limit was hit."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("model failure")
        self.cause = cause


class ParsedCall(msgspec.Struct):
    """A tool call as the model sent it; ``error`` says why it cannot run (``raw``: its text)."""

    call: ToolCall
    error: str | None = None
    raw: str = ""


class Response(msgspec.Struct):
    """A model response once its stream has ended."""

    text: str
    reasoning: str
    calls: list[ParsedCall]
    finish: str | None


class _CallParts:
    """The fragments of one streamed tool call."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class StreamedResponse:
    """One response as it streams: a small state machine fed chunk by chunk."""

    __slots__ = ("calls", "finish", "reasoning", "text", "usage")

    def __init__(self, text: list[str], reasoning: list[str]) -> None:
        self.text = text
        self.reasoning = reasoning
        self.calls: dict[int, _CallParts] = {}
        self.usage: UsageChunk | None = None
        self.finish: str | None = None

    async def read(
        self, stream: AsyncIterator[ModelChunk], turn: TurnState, hooks: HookRunner
    ) -> None:
        """Consume ``stream``, emitting each text and reasoning delta as it arrives."""
        emit = turn.emit
        text = self.text
        reasoning = self.reasoning
        next_chunk = _chunk_reader(turn.cfg.idle_stream_timeout_ms)
        limit = turn.cfg.reasoning_without_progress_chars
        reasoning_limit = sys.maxsize if limit is None else limit
        observe = hooks.observes_chunks
        reasoning_run = 0
        # idle_stream_max_chars: text and reasoning of a stream that has made no tool call yet.
        idle_max = turn.cfg.idle_stream_max_chars
        idle_limit = sys.maxsize if idle_max is None else idle_max
        idle_run = 0
        while True:
            try:
                chunk = await next_chunk(stream)
            except StopAsyncIteration:
                return
            except (ModelFailure, anyio.get_cancelled_exc_class()):
                raise
            except Exception as exc:
                raise ModelFailure(exc) from None
            if observe:
                await hooks.call("on_stream_chunk", chunk)
            if type(chunk) is TextChunk:
                if chunk.delta:
                    text.append(chunk.delta)
                    reasoning_run = 0
                    idle_run += len(chunk.delta)
                    await emit("content_delta", {"delta": chunk.delta})
                    if idle_run > idle_limit:
                        raise _idle_stream(idle_limit)
            elif type(chunk) is ReasoningChunk:
                if chunk.delta:
                    reasoning.append(chunk.delta)
                    reasoning_run += len(chunk.delta)
                    idle_run += len(chunk.delta)
                    await emit("reasoning_delta", {"delta": chunk.delta})
                    if reasoning_run > reasoning_limit:
                        raise _too_much_reasoning(reasoning_limit)
                    if idle_run > idle_limit:
                        raise _idle_stream(idle_limit)
            elif self._take(chunk):
                reasoning_run = 0
                idle_limit = sys.maxsize  # a stream with a tool call is not idle

    def _take(self, chunk: ModelChunk) -> bool:
        """A chunk that is neither text nor reasoning. True = a tool-call fragment (progress)."""
        if type(chunk) is ToolCallChunk:
            parts = self.calls.get(chunk.index)
            if parts is None:
                parts = self.calls[chunk.index] = _CallParts()
            if chunk.id:
                parts.id = chunk.id
            if chunk.name:
                parts.name = chunk.name
            if chunk.arguments:
                parts.arguments.append(chunk.arguments)
            return True
        if type(chunk) is UsageChunk:
            self.usage = chunk
        elif type(chunk) is FinishChunk:
            self.finish = chunk.reason
        return False

    def cut(self, reason: str) -> None:
        """The stream was stopped before its end: ``reason`` is its finish reason."""
        self.finish = reason
        self.calls.clear()

    def response(self, round_: int) -> Response:
        """The assembled response; the turn's live buffers are emptied into it."""
        response = Response(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            calls=[_parse_call(round_, i, parts) for i, parts in sorted(self.calls.items())],
            finish=self.finish,
        )
        self.text.clear()
        self.reasoning.clear()
        return response


async def stream_response(
    turn: TurnState, hooks: HookRunner, request: ModelRequest
) -> StreamedResponse:
    """Stream one model response for ``request``: the one call site of the model provider."""
    streamed = StreamedResponse(turn.live_text, turn.live_reasoning)
    try:
        stream = aiter(turn.loop.provider.stream(request))
    except Exception as exc:
        raise ModelFailure(exc) from None
    # The request's HTTP call happens as the stream is read, in this task: under the chat span.
    with turn.loop.scope("chat"):
        try:
            # A steer (steer_mode "interrupt") or, in wrap-up, wrap_up_tool_timeout_ms may cut
            # the stream short: what streamed is kept, its tool calls (maybe half-sent) are not.
            with turn.control.interruptible() as phase:
                wrap_up_ms = turn.cfg.wrap_up_tool_timeout_ms
                if turn.wrap_up and wrap_up_ms is not None:
                    phase.deadline = anyio.current_time() + wrap_up_ms / 1000
                await streamed.read(stream, turn, hooks)
        finally:
            await _close(stream)
    if turn.control.take_interrupt() and phase.cancelled_caught:
        streamed.cut("interrupted")
    elif phase.cancelled_caught:
        streamed.cut("wrap_up_timeout")
    return streamed


async def _close(stream: AsyncIterator[ModelChunk]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with anyio.move_on_after(1.0, shield=True), suppress(Exception):
            await aclose()


def _chunk_reader(idle_ms: int | None) -> ChunkReader:
    """How to await the next chunk: plain ``anext``, or bounded by the idle timeout."""
    if idle_ms is None:
        return anext
    idle_s = idle_ms / 1000

    async def within_idle_timeout(stream: AsyncIterator[ModelChunk]) -> ModelChunk:
        with anyio.move_on_after(idle_s):
            return await anext(stream)
        raise ModelFailure(
            ProviderError(f"model stream idle for more than {idle_ms} ms", retryable=True)
        )

    return within_idle_timeout


def _idle_stream(limit: int) -> ModelFailure:
    return ModelFailure(
        ProviderError(
            f"the model streamed more than {limit} characters of text and reasoning "
            "without a tool call"
        )
    )


def _too_much_reasoning(limit: int) -> ModelFailure:
    return ModelFailure(
        ProviderError(f"reasoning exceeded {limit} characters without text or a tool call")
    )


def _parse_call(round_: int, index: int, parts: _CallParts) -> ParsedCall:
    """The tool call at ``index``: its id (one is made up if missing), name and arguments."""
    call_id = parts.id or f"call_{round_}_{index}"
    name = parts.name or ""
    raw = "".join(parts.arguments)
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
    return ParsedCall(ToolCall(id=call_id, name=name, arguments=arguments), error, raw)
