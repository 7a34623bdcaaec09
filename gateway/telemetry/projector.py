"""The trace projector: a run's envelopes in, span records out (sans-IO, deterministic).

One projector per run. It knows nothing of OpenTelemetry's SDK: it only says which span opens
or closes when, under which parent, with which attributes and status. Times are the envelopes'
``ts``, so a replayed or ingested stream yields the same timing shape as a live one, and the
records of a recorded stream are byte-stable (the goldens in ``conformance/expected/otel/``).

Span keys are stable names (``run``, ``chat.3``, ``tool.<call id>``, ``approval.<request id>``)
instead of random ids; :mod:`gateway.telemetry.spans` maps them onto real spans.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

from contracts.contract import is_terminal_completion
from contracts.envelope import Envelope
from contracts.events import completion_status, tool_failed
from contracts.messages import Message

AttrValue = str | bool | int | float | list[str]
Attributes = dict[str, AttrValue]
SpanKind = Literal["internal", "client"]

RUN = "run"
# Content capture keeps the newest input messages only (a long history is in earlier traces).
MAX_INPUT_MESSAGES = 32
NONE: tuple[()] = ()

# GenAI semantic conventions (Development status); spelled out so a rename is one grep away.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

DELTAS = frozenset(("content_delta", "reasoning_delta"))
# Payload fields read only with content capture on, and the kinds that carry them: whoever
# feeds a projector without it may leave them out (a tool result can be megabytes).
CONTENT_FIELDS: dict[str, tuple[str, ...]] = {
    "content_delta": ("delta",),
    "reasoning_delta": ("delta",),
    "tool_call_start": ("arguments",),
    "tool_call_result": ("result", "resultPreview"),
    "tool_error": ("result", "resultPreview"),
    "steer": ("content",),
}
# Span events (point-in-time annotations on the run span) for these kinds.
ANNOTATED = ("error", "hook_action", "steer", "soft_timeout", "budget_exhausted")

INT64_MAX = (1 << 63) - 1
_json = msgspec.json.Encoder()
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


class SpanStart(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str
    kind: SpanKind
    # Key of the parent span; None for the run span (its parent is the incoming traceparent).
    parent: str | None
    start_ns: int
    attributes: Attributes


class SpanEnd(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    end_ns: int
    attributes: Attributes
    # None leaves the status unset (success: instrumentation never sets OK); else ERROR + this.
    error: str | None = None


class SpanEvent(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str
    ts: int
    attributes: Attributes


Record = SpanStart | SpanEnd | SpanEvent


class TraceContext(msgspec.Struct, frozen=True, kw_only=True):
    """What the projector knows about the run before its first event."""

    run_id: str
    thread_id: str
    source: str
    created_at: int
    agent_name: str = "loopgate"
    provider_name: str = "unknown"
    input: tuple[Message, ...] = ()


class _Chat:
    __slots__ = ("first_delta", "key", "model", "reasoning", "start", "text")

    def __init__(self, key: str, start: int, model: str | None) -> None:
        self.key = key
        self.start = start
        self.model = model
        self.first_delta: int | None = None
        self.text: list[str] = []
        self.reasoning: list[str] = []


class TraceProjector:
    """Envelopes of one run → span records. Never raises on odd input; never does I/O."""

    def __init__(
        self,
        context: TraceContext,
        *,
        content: bool = False,
        max_content_chars: int = 16_384,
        max_open_spans: int = 1_024,
    ) -> None:
        self.context = context
        self.content = content
        self.max_content_chars = max_content_chars
        self.max_open_spans = max_open_spans
        self.ended = False
        self._model: str | None = None
        self._chat: _Chat | None = None
        self._chats = 0
        # Open tool and approval spans, key → tool call id / parent key (insertion-ordered).
        self._tools: dict[str, str] = {}
        self._approvals: dict[str, str] = {}
        self._dropped = 0
        self._tool_calls = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._usage_seen = False
        self._last_error: str | None = None
        self._last: Envelope | None = None
        # False while a delta would change nothing (no model request waiting for its first
        # delta, no content capture): callers on a hot path may skip feeding deltas then.
        self.wants_deltas = False

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> list[Record]:
        ctx = self.context
        attrs: Attributes = {
            OPERATION: "invoke_agent",
            AGENT_NAME: ctx.agent_name,
            PROVIDER: ctx.provider_name,
            CONVERSATION: ctx.thread_id,
            "loopgate.run.id": ctx.run_id,
            "loopgate.run.source": ctx.source,
        }
        if self.content and ctx.input:
            messages = _messages(ctx.input[-MAX_INPUT_MESSAGES:], self._clip)
            attrs[INPUT_MESSAGES] = _json.encode(messages).decode()
        return [
            SpanStart(
                key=RUN,
                name=f"invoke_agent {ctx.agent_name}",
                kind="internal",
                parent=None,
                start_ns=ctx.created_at,
                attributes=attrs,
            )
        ]

    def feed(self, env: Envelope) -> Sequence[Record]:
        kind = env.kind
        if kind in DELTAS and not self.wants_deltas:
            return NONE
        if self.ended:
            return NONE
        self._last = env
        data = env.data if isinstance(env.data, dict) else {}
        if kind in DELTAS:
            chat = self._chat
            if chat is not None:
                if chat.first_delta is None:
                    chat.first_delta = env.ts
                    self.wants_deltas = self.content
                if self.content:
                    delta = data.get("delta")
                    if isinstance(delta, str):
                        (chat.text if kind == "content_delta" else chat.reasoning).append(delta)
            return NONE
        handler = _HANDLERS.get(kind)
        if handler is not None:
            return handler(self, env, data)
        if kind in ANNOTATED:
            return [self._annotation(env, data)]
        return NONE

    def close(self, status: str = "failed", reason: str = "truncated") -> list[Record]:
        """End the run as if a terminal completion arrived (a stream that stopped short)."""
        if self.ended:
            return []
        ts = self._last.ts if self._last is not None else self.context.created_at
        seq = self._last.seq + 1 if self._last is not None else 1
        return self._complete(ts, seq, {"status": status, "reason": reason})

    # --- handlers -----------------------------------------------------------------------

    def _stage_start(self, env: Envelope, data: dict[str, Any]) -> Sequence[Record]:
        model = data.get("model")
        if isinstance(model, str) and model:
            self._model = model
        return NONE

    def _llm_request(self, env: Envelope, data: dict[str, Any]) -> list[Record]:
        out: list[Record] = []
        if self._chat is not None:
            out.append(self._interrupt(self._chat.key, env.ts, "a new model request began"))
            self._chat = None
        model = data.get("model")
        if not isinstance(model, str) or not model:
            model = self._model
        self._chats += 1
        chat = _Chat(f"chat.{self._chats}", env.ts, model)
        self._chat = chat
        self.wants_deltas = True
        attrs: Attributes = {OPERATION: "chat", PROVIDER: self._provider(data)}
        if model:
            attrs[REQUEST_MODEL] = model
        _copy_int(data, "round", attrs, "loopgate.round")
        _copy_int(data, "attempt", attrs, "loopgate.attempt")
        out.append(
            SpanStart(
                key=chat.key,
                name=f"chat {model}" if model else "chat",
                kind="client",
                parent=RUN,
                start_ns=env.ts,
                attributes=attrs,
            )
        )
        return out

    def _llm_response(self, env: Envelope, data: dict[str, Any]) -> list[Record]:
        out: list[Record] = []
        chat = self._chat
        if chat is None:
            # An external loop that reports responses only: a zero-length span still counts.
            out.extend(self._llm_request(env, data))
            chat = self._chat
            assert chat is not None
        self._chat = None
        self.wants_deltas = False
        attrs: Attributes = {}
        model = data.get("model")
        if isinstance(model, str) and model:
            attrs[RESPONSE_MODEL] = model
        finish = data.get("finishReason")
        if isinstance(finish, str) and finish:
            attrs[FINISH_REASONS] = [finish]
        for src, dst in (
            ("promptTokens", INPUT_TOKENS),
            ("completionTokens", OUTPUT_TOKENS),
            ("reasoningTokens", REASONING_TOKENS),
        ):
            value = data.get(src)
            if type(value) is int and 0 <= value <= INT64_MAX:
                attrs[dst] = value
                self._usage_seen = True
                if dst == INPUT_TOKENS:
                    self._input_tokens += value
                elif dst == OUTPUT_TOKENS:
                    self._output_tokens += value
        if chat.first_delta is not None:
            attrs[FIRST_CHUNK] = (chat.first_delta - chat.start) / 1e9
        if self.content and (chat.text or chat.reasoning):
            attrs[OUTPUT_MESSAGES] = self._output_messages(chat, finish)
        error = data.get("error")
        message: str | None = None
        if error is not None:
            message = error if isinstance(error, str) and error else "the model request failed"
            error_type = data.get("errorType")
            attrs[ERROR_TYPE] = (
                error_type if isinstance(error_type, str) and error_type else "provider_error"
            )
            self._last_error = message
        out.append(SpanEnd(key=chat.key, end_ns=env.ts, attributes=attrs, error=message))
        return out

    def _tool_call_start(self, env: Envelope, data: dict[str, Any]) -> Sequence[Record]:
        call_id = _text(data.get("id"))
        key = f"tool.{call_id}"
        if key in self._tools:
            return NONE
        if len(self._tools) + len(self._approvals) >= self.max_open_spans:
            self._dropped += 1
            return NONE
        self._tools[key] = call_id
        self._tool_calls += 1
        return [self._tool_start(key, call_id, env, data)]

    def _tool_start(self, key: str, call_id: str, env: Envelope, data: dict[str, Any]) -> SpanStart:
        name = _text(data.get("name"))
        attrs: Attributes = {
            OPERATION: "execute_tool",
            TOOL_NAME: name,
            TOOL_CALL_ID: call_id,
            TOOL_TYPE: "function",
        }
        _copy_int(data, "round", attrs, "loopgate.round")
        if self.content and "arguments" in data:
            attrs[TOOL_ARGUMENTS] = self._clip(_json.encode(data["arguments"]).decode())
        return SpanStart(
            key=key,
            name=f"execute_tool {name}",
            kind="internal",
            parent=RUN,
            start_ns=env.ts,
            attributes=attrs,
        )

    def _tool_end(self, env: Envelope, data: dict[str, Any]) -> list[Record]:
        call_id = _text(data.get("id"))
        key = f"tool.{call_id}"
        out: list[Record] = []
        if self._tools.pop(key, None) is None:
            # A result without a start (an ingested stream that began mid-round).
            out.append(self._tool_start(key, call_id, env, data))
        attrs: Attributes = {}
        message: str | None = None
        if env.kind == "tool_error":
            attrs[ERROR_TYPE] = "tool_error"
            message = _text(data.get("error")) or "the tool raised an error"
        elif tool_failed(env.kind, data):
            attrs[ERROR_TYPE] = "tool_failed"
            message = _text(data.get("error")) or "the tool reported a failure"
        if self.content:
            result = data.get("result")
            if result is None:
                result = data.get("resultPreview")
            if result is not None:
                text = result if isinstance(result, str) else _json.encode(result).decode()
                attrs[TOOL_RESULT] = self._clip(text)
        out.extend(self._close_approvals_under(key, env.ts))
        out.append(SpanEnd(key=key, end_ns=env.ts, attributes=attrs, error=message))
        return out

    def _permission_request(self, env: Envelope, data: dict[str, Any]) -> Sequence[Record]:
        request_id = _text(data.get("requestId"))
        key = f"approval.{request_id}"
        if key in self._approvals or len(self._tools) + len(self._approvals) >= (
            self.max_open_spans
        ):
            return NONE
        call = data.get("toolCall") if isinstance(data.get("toolCall"), dict) else {}
        tool_key = f"tool.{_text(call.get('id'))}"
        parent = tool_key if tool_key in self._tools else RUN
        self._approvals[key] = parent
        name = _text(call.get("name"))
        attrs: Attributes = {
            "loopgate.permission.request_id": request_id,
            TOOL_NAME: name,
            TOOL_CALL_ID: _text(call.get("id")),
        }
        return [
            SpanStart(
                key=key,
                name=f"await_approval {name}",
                kind="internal",
                parent=parent,
                start_ns=env.ts,
                attributes=attrs,
            )
        ]

    def _permission_result(self, env: Envelope, data: dict[str, Any]) -> Sequence[Record]:
        attrs: Attributes = {
            "loopgate.permission.decision": _text(data.get("decision")),
            "loopgate.permission.by": _text(data.get("by")),
        }
        key = f"approval.{_text(data.get('requestId'))}"
        if self._approvals.pop(key, None) is not None:
            return [SpanEnd(key=key, end_ns=env.ts, attributes=attrs)]
        # A remembered decision never asked anyone: an annotation, not a span.
        tool_key = f"tool.{_text(data.get('toolCallId'))}"
        target = tool_key if tool_key in self._tools else RUN
        return [SpanEvent(key=target, name="permission_result", ts=env.ts, attributes=attrs)]

    def _completion(self, env: Envelope, data: dict[str, Any]) -> Sequence[Record]:
        if not is_terminal_completion("completion", data):
            return NONE
        return self._complete(env.ts, env.seq, data)

    # --- helpers ------------------------------------------------------------------------

    def _complete(self, ts: int, seq: int, data: dict[str, Any]) -> list[Record]:
        self.ended = True
        status = completion_status(data)
        reason = _text(data.get("reason"))
        out: list[Record] = []
        # Whatever is still open ends with the run: a tool that waits for the user is pending,
        # anything else was cut short.
        for key in list(self._approvals):
            out.append(self._interrupt(key, ts, f"the run ended ({status})"))
        self._approvals.clear()
        if self._chat is not None:
            out.append(self._interrupt(self._chat.key, ts, f"the run ended ({status})"))
            self._chat = None
            self.wants_deltas = False
        for key in self._tools:
            if status == "waiting_user":
                out.append(SpanEnd(key=key, end_ns=ts, attributes={"loopgate.tool.pending": True}))
            else:
                out.append(self._interrupt(key, ts, f"the run ended ({status})"))
        self._tools.clear()
        attrs: Attributes = {
            "loopgate.run.status": status,
            "loopgate.run.events": seq,
            "loopgate.run.model_requests": self._chats,
            "loopgate.run.tool_calls": self._tool_calls,
        }
        if reason:
            attrs["loopgate.run.reason"] = reason
        if self._usage_seen:
            attrs[INPUT_TOKENS] = self._input_tokens
            attrs[OUTPUT_TOKENS] = self._output_tokens
        if self._dropped:
            attrs["loopgate.spans.dropped"] = self._dropped
        error: str | None = None
        if status == "failed":
            attrs[ERROR_TYPE] = reason or "failed"
            error = self._last_error or reason or "the run failed"
        out.append(SpanEnd(key=RUN, end_ns=ts, attributes=attrs, error=error))
        return out

    def _close_approvals_under(self, parent: str, ts: int) -> list[Record]:
        keys = [k for k, p in self._approvals.items() if p == parent]
        for key in keys:
            del self._approvals[key]
        return [self._interrupt(key, ts, "the tool call ended first") for key in keys]

    def _interrupt(self, key: str, ts: int, why: str) -> SpanEnd:
        return SpanEnd(key=key, end_ns=ts, attributes={ERROR_TYPE: "interrupted"}, error=why)

    def _annotation(self, env: Envelope, data: dict[str, Any]) -> SpanEvent:
        attrs: Attributes = {}
        for name, value in data.items():
            if name == "content" and not self.content:
                continue  # a steering message is user content
            key = f"loopgate.{_snake(name)}"
            if isinstance(value, str):
                attrs[key] = self._clip(value)
            elif isinstance(value, bool | float) or _int64(value):
                attrs[key] = value
        if env.kind == "error" and isinstance(data.get("message"), str):
            self._last_error = data["message"]
        return SpanEvent(key=RUN, name=env.kind, ts=env.ts, attributes=attrs)

    def _provider(self, data: dict[str, Any]) -> str:
        provider = data.get("provider")
        return provider if isinstance(provider, str) and provider else self.context.provider_name

    def _output_messages(self, chat: _Chat, finish: Any) -> str:
        parts: list[dict[str, str]] = []
        if chat.reasoning:
            parts.append({"type": "reasoning", "content": self._clip("".join(chat.reasoning))})
        if chat.text:
            parts.append({"type": "text", "content": self._clip("".join(chat.text))})
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if isinstance(finish, str) and finish:
            message["finish_reason"] = finish
        return _json.encode([message]).decode()

    def _clip(self, text: str) -> str:
        limit = self.max_content_chars
        return text if len(text) <= limit else text[:limit] + "…"


def _messages(messages: Sequence[Message], clip: Callable[[str], str]) -> list[dict[str, Any]]:
    """Messages in the GenAI conventions' shape (role + parts), each text clipped."""
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.content:
            if m.role == "tool":
                parts.append(
                    {"type": "tool_call_response", "id": m.tool_call_id, "result": clip(m.content)}
                )
            else:
                parts.append({"type": "text", "content": clip(m.content)})
        for call in m.tool_calls:
            parts.append(
                {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            )
        out.append({"role": m.role, "parts": parts})
    return out


def _snake(name: str) -> str:
    """``delayMs`` → ``delay_ms``: attribute names follow OTel's snake_case."""
    return _CAMEL.sub("_", name).lower()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int64(value: Any) -> bool:
    # OTLP carries 64-bit integers: a bigger one would fail the whole export batch.
    return type(value) is int and -INT64_MAX - 1 <= value <= INT64_MAX


def _copy_int(data: dict[str, Any], src: str, attrs: Attributes, dst: str) -> None:
    value = data.get(src)
    if _int64(value):
        attrs[dst] = value


_HANDLERS = {
    "stage_start": TraceProjector._stage_start,
    "llm_request": TraceProjector._llm_request,
    "llm_response": TraceProjector._llm_response,
    "tool_call_start": TraceProjector._tool_call_start,
    "tool_call_result": TraceProjector._tool_end,
    "tool_error": TraceProjector._tool_end,
    "permission_request": TraceProjector._permission_request,
    "permission_result": TraceProjector._permission_result,
    "completion": TraceProjector._completion,
}
# Every kind a projector may act on (completions: terminal ones only). Whoever feeds one may
# leave the others out: they change no span.
TRACED_KINDS = frozenset(_HANDLERS) | frozenset(ANNOTATED) | DELTAS
# The same without deltas: what a traced run's events are filtered to while no delta would
# change a span (outside model calls, and after the first delta of each without content).
SPAN_KINDS = TRACED_KINDS - DELTAS
