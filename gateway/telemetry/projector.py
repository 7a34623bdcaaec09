"""The trace projector: a run's envelopes in, span records out (sans-IO, deterministic).

One projector per run. It knows nothing of OpenTelemetry's SDK: it only says which span opens
or closes when, under which parent, with which attributes and status. Times are the envelopes'
``ts``, so a replayed or ingested stream yields the same timing shape as a live one, and the
records of a recorded stream are byte-stable (the goldens in ``conformance/expected/otel/``).

It is a projector like the wire adapters' (adapters.shared.projector): the base keeps the run's
bookkeeping — the tool calls in flight, the model, token usage, the last error, the end of the
run, orphan results announced — and the hooks here turn it into spans. Span keys are stable
names (``run``, ``chat.3``, ``tool.<call id>``, ``approval.<request id>``) instead of random
ids; :mod:`loopgate.gateway.telemetry.spans` maps them onto real spans.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...adapters.shared.projector import TEXT, TOOL_RESULTS, Call, RunProjector, Segment
from ...contracts.envelope import Envelope
from ...contracts.events import PermissionRequestView, PermissionResultView
from ...contracts.gateway_events import PERMISSION_REQUEST, PERMISSION_RESULT
from ...contracts.projector import ProjectorContext
from .records import (
    AGENT_NAME,
    APPROVAL,
    CONVERSATION,
    ENDUSER_ID,
    ERROR_TYPE,
    FINISH_REASONS,
    FIRST_CHUNK,
    INPUT_MESSAGES,
    INPUT_TOKENS,
    MAX_INPUT_MESSAGES,
    OPERATION,
    OUTPUT_MESSAGES,
    OUTPUT_TOKENS,
    PROVIDER,
    REASONING_TOKENS,
    REQUEST_MODEL,
    RESPONSE_MODEL,
    RUN,
    TENANT,
    TOOL,
    TOOL_ARGUMENTS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_RESULT,
    TOOL_TYPE,
    Attributes,
    Record,
    SpanEnd,
    SpanEvent,
    SpanStart,
    TraceContext,
)
from .values import (
    INT64_MAX,
    copy_int,
    genai_messages,
    is_int64,
    snake_case,
)

DELTAS = frozenset(("content_delta", "reasoning_delta"))
# Span events (point-in-time annotations on the run span) for these kinds.
ANNOTATED = frozenset(("error", "hook_action", "steer", "soft_timeout", "budget_exhausted"))
# Every kind that changes a span or what the base knows of the run (its model, usage, tool
# calls, last error, end). Whoever feeds a projector may leave the others out.
TRACED_KINDS = frozenset(
    ("stage_start", "llm_request", "llm_response", "tool_call_start", *TOOL_RESULTS)
) | frozenset((PERMISSION_REQUEST, PERMISSION_RESULT, "completion", *ANNOTATED, *DELTAS))
# The same without deltas: what a traced run's events are filtered to while the projector
# does not want them (see TraceProjector.wants_deltas).
SPAN_KINDS = TRACED_KINDS - DELTAS

# An llm_response's token counts → the chat span's attributes.
_COUNTS = (
    ("promptTokens", INPUT_TOKENS),
    ("completionTokens", OUTPUT_TOKENS),
    ("reasoningTokens", REASONING_TOKENS),
)
_json = msgspec.json.Encoder()
# What a response (chat span) or a run cost, from the operator's price table; the GenAI
# conventions have no cost attribute yet.
COST_USD = "loopgate.usage.cost_usd"


class _Chat:
    __slots__ = ("first_delta", "key", "reasoning", "start", "text")

    def __init__(self, key: str, start: int) -> None:
        self.key = key
        self.start = start
        self.first_delta: int | None = None
        self.text: list[str] = []
        self.reasoning: list[str] = []


class TraceProjector(RunProjector[Record]):
    """Envelopes of one run → span records. Never raises on odd input; never does I/O.

    ``wants_deltas`` is False while a delta would change nothing (no model request waiting for
    its first delta, no content capture): a caller on a hot path may skip feeding deltas then.
    """

    # Slots, not the instance dict: with the base's attributes a dict would hold 30 keys, and
    # CPython 3.11 stops sharing keys there, which slows every attribute read on every event.
    __slots__ = (
        "_approvals",
        "_chat",
        "_chats",
        "_cost_usd",
        "_dropped",
        "_tool_calls",
        "_tools",
        "_who",
        "content",
        "max_content_chars",
        "max_open_spans",
        "trace",
        "wants_deltas",
    )

    def __init__(
        self,
        context: TraceContext,
        *,
        content: bool = False,
        max_content_chars: int = 16_384,
        max_open_spans: int = 1_024,
    ) -> None:
        super().__init__(ProjectorContext(run_id=context.run_id, thread_id=context.thread_id))
        self.trace = context
        self.content = content
        self.max_content_chars = max_content_chars
        self.max_open_spans = max_open_spans
        self.wants_deltas = False
        self._chat: _Chat | None = None
        self._chats = 0
        self._cost_usd: float | None = None  # the responses' costUsd (a price table's), summed
        # Calls whose span is open: not every call in flight has one (max_open_spans).
        self._tools: set[str] = set()
        self._tool_calls = 0
        # Open approval spans: key → the key of their parent (insertion-ordered).
        self._approvals: dict[str, str] = {}
        self._dropped = 0
        # Every span of the run says whose it is: a trace backend filters any of them by user.
        self._who: Attributes = {}
        if context.enduser_id is not None:
            self._who[ENDUSER_ID] = context.enduser_id
        if context.tenant is not None:
            self._who[TENANT] = context.tenant

    # --- the run span -------------------------------------------------------------------

    def on_start(self) -> list[Record]:
        ctx = self.trace
        attrs: Attributes = {
            OPERATION: "invoke_agent",
            AGENT_NAME: ctx.agent_name,
            PROVIDER: ctx.provider_name,
            CONVERSATION: ctx.thread_id,
            "loopgate.run.id": ctx.run_id,
            "loopgate.run.source": ctx.source,
            **self._who,
        }
        if self.content and ctx.input:
            messages = genai_messages(ctx.input[-MAX_INPUT_MESSAGES:], self._clip)
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

    def passthrough(self, envelope: Envelope) -> list[Record]:
        return [self._annotation(envelope)] if envelope.kind in ANNOTATED else []

    def on_terminal(self, status: str, envelope: Envelope) -> list[Record]:
        reason = _text(envelope.data.get("reason"))
        return [self._run_end(status, reason, envelope.ts, envelope.seq)]

    def on_truncated(self, reason: str) -> list[Record]:
        # As if a completion came one seq after the last event, at its time.
        last = self.last
        seq = last.seq + 1 if last is not None else 1
        return [self._run_end("failed", reason, self._now(), seq)]

    def on_finish(self, status: str) -> list[Record]:
        # Whatever is still open ends with the run (the tools in close_call, after these).
        self.wants_deltas = False
        if not self._approvals and self._chat is None:
            return []
        ts, why = self._now(), f"the run ended ({status})"
        ended: list[Record] = [_interrupted(key, ts, why) for key in self._approvals]
        self._approvals.clear()
        if self._chat is not None:
            ended.append(_interrupted(self._chat.key, ts, why))
            self._chat = None
        return ended

    # --- model requests -----------------------------------------------------------------

    def on_llm_request(self, envelope: Envelope) -> list[Record]:
        out: list[Record] = []
        if self._chat is not None:
            out.append(_interrupted(self._chat.key, envelope.ts, "a new model request began"))
        out.append(self._open_chat(envelope)[1])
        return out

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[Record]:
        chat = self._chat
        if chat is not None:
            if chat.first_delta is None:
                chat.first_delta = envelope.ts
                self.wants_deltas = self.content
            if self.content:
                (chat.text if segment.kind == TEXT else chat.reasoning).append(delta)
        return []

    def on_llm_response(self, envelope: Envelope) -> list[Record]:
        data = envelope.data
        out: list[Record] = []
        chat = self._chat
        if chat is None:
            # An external loop that reports responses only: a zero-length span still counts.
            chat, opened = self._open_chat(envelope)
            out.append(opened)
        self._chat = None
        self.wants_deltas = False
        attrs: Attributes = {}
        model = data.get("model")
        if isinstance(model, str) and model:
            attrs[RESPONSE_MODEL] = model
        finish = data.get("finishReason")
        if isinstance(finish, str) and finish:
            attrs[FINISH_REASONS] = [finish]
        # This response's own counts (the run's totals are the base's usage).
        for src, dst in _COUNTS:
            count = data.get(src)
            if type(count) is int and 0 <= count <= INT64_MAX:
                attrs[dst] = count
        cost = data.get("costUsd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e9:
            attrs[COST_USD] = float(cost)
            self._cost_usd = (self._cost_usd or 0.0) + float(cost)
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
            # The base knows the errors of error events; a failed request's is as telling.
            self.last_error = message
        out.append(SpanEnd(key=chat.key, end_ns=envelope.ts, attributes=attrs, error=message))
        return out

    def _open_chat(self, envelope: Envelope) -> tuple[_Chat, SpanStart]:
        """A chat span opens: ``_chat`` from now, and the record that starts it."""
        data = envelope.data
        # The base's model is the newest a stage or request named; a response names its own.
        model = data.get("model")
        if not isinstance(model, str) or not model:
            model = self.model
        self._chats += 1
        self._chat = chat = _Chat(f"chat.{self._chats}", envelope.ts)
        self.wants_deltas = True
        provider = data.get("provider")
        if not isinstance(provider, str) or not provider:
            provider = self.trace.provider_name
        attrs: Attributes = {OPERATION: "chat", PROVIDER: provider, **self._who}
        if model:
            attrs[REQUEST_MODEL] = model
        copy_int(data, "round", attrs, "loopgate.round")
        copy_int(data, "attempt", attrs, "loopgate.attempt")
        return chat, SpanStart(
            key=chat.key,
            name=f"chat {model}" if model else "chat",
            kind="client",
            parent=RUN,
            start_ns=envelope.ts,
            attributes=attrs,
        )

    # --- tool calls ---------------------------------------------------------------------

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[Record]:
        if call.id in self._tools:
            return []  # a start repeated while its span is open
        if self._full():
            self._dropped += 1
            return []
        self._tools.add(call.id)
        self._tool_calls += 1
        return [self._tool_span(call, envelope)]

    def announce_call(self, call: Call, envelope: Envelope) -> list[Record]:
        # A result without a start (an ingested stream that began mid-round): its span opens
        # here and ends with the result.
        self._tools.add(call.id)
        return [self._tool_span(call, envelope)]

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[Record]:
        data = envelope.data
        key = TOOL + call.id
        out: list[Record] = []
        if call.id in self._tools:
            self._tools.remove(call.id)
        else:
            # Its start found no room (max_open_spans): a span of no length still shows it.
            out.append(self._tool_span(call, envelope))
        attrs: Attributes = {}
        message: str | None = None
        if envelope.kind == "tool_error":
            attrs[ERROR_TYPE] = "tool_error"
            message = _text(data.get("error")) or "the tool raised an error"
        elif failed:
            attrs[ERROR_TYPE] = "tool_failed"
            message = _text(data.get("error")) or "the tool reported a failure"
        if self.content:
            result = data.get("result")
            if result is None:
                result = data.get("resultPreview")
            if result is not None:
                text = result if isinstance(result, str) else _json.encode(result).decode()
                attrs[TOOL_RESULT] = self._clip(text)
        ts = envelope.ts
        under = [k for k, parent in self._approvals.items() if parent == key]
        for approval in under:
            del self._approvals[approval]
            out.append(_interrupted(approval, ts, "the tool call ended first"))
        out.append(SpanEnd(key=key, end_ns=ts, attributes=attrs, error=message))
        return out

    def close_call(self, call: Call, status: str) -> list[Record]:
        if call.id not in self._tools:
            return []
        key = TOOL + call.id
        if status == "waiting_user":  # it waits for the user: pending, not cut short
            pending: Attributes = {"loopgate.tool.pending": True}
            return [SpanEnd(key=key, end_ns=self._now(), attributes=pending)]
        return [_interrupted(key, self._now(), f"the run ended ({status})")]

    def _tool_span(self, call: Call, envelope: Envelope) -> SpanStart:
        attrs: Attributes = {
            OPERATION: "execute_tool",
            TOOL_NAME: call.name,
            TOOL_CALL_ID: call.id,
            TOOL_TYPE: "function",
            **self._who,
        }
        copy_int(envelope.data, "round", attrs, "loopgate.round")
        if self.content and call.arguments is not None:
            attrs[TOOL_ARGUMENTS] = self._clip(_json.encode(call.arguments).decode())
        return SpanStart(
            key=TOOL + call.id,
            name=f"execute_tool {call.name}",
            kind="internal",
            parent=RUN,
            start_ns=envelope.ts,
            attributes=attrs,
        )

    # --- approvals ----------------------------------------------------------------------

    def on_permission_request(
        self, view: PermissionRequestView, envelope: Envelope
    ) -> list[Record]:
        request_id = view.request_id or ""
        key = APPROVAL + request_id
        if key in self._approvals or self._full():
            return []
        call = view.tool_call or {}
        call_id, name = _text(call.get("id")), _text(call.get("name"))
        parent = TOOL + call_id if call_id in self._tools else RUN
        self._approvals[key] = parent
        attrs: Attributes = {
            "loopgate.permission.request_id": request_id,
            TOOL_NAME: name,
            TOOL_CALL_ID: call_id,
            **self._who,
        }
        return [
            SpanStart(
                key=key,
                name=f"await_approval {name}",
                kind="internal",
                parent=parent,
                start_ns=envelope.ts,
                attributes=attrs,
            )
        ]

    def on_permission_result(self, view: PermissionResultView, envelope: Envelope) -> list[Record]:
        attrs: Attributes = {
            "loopgate.permission.decision": view.decision or "",
            "loopgate.permission.by": view.by or "",
        }
        key = APPROVAL + (view.request_id or "")
        if self._approvals.pop(key, None) is not None:
            return [SpanEnd(key=key, end_ns=envelope.ts, attributes=attrs)]
        # A remembered decision never asked anyone: an annotation, not a span.
        call_id = view.tool_call_id or ""
        target = TOOL + call_id if call_id in self._tools else RUN
        return [SpanEvent(key=target, name="permission_result", ts=envelope.ts, attributes=attrs)]

    # --- helpers ------------------------------------------------------------------------

    def _run_end(self, status: str, reason: str, ts: int, seq: int) -> SpanEnd:
        attrs: Attributes = {
            "loopgate.run.status": status,
            "loopgate.run.events": seq,
            "loopgate.run.model_requests": self._chats,
            "loopgate.run.tool_calls": self._tool_calls,
        }
        if reason:
            attrs["loopgate.run.reason"] = reason
        if self._cost_usd is not None:
            attrs[COST_USD] = round(self._cost_usd, 8)
        if self.usage:
            input_tokens, output_tokens = self.usage_totals()
            attrs[INPUT_TOKENS] = min(input_tokens, INT64_MAX)
            attrs[OUTPUT_TOKENS] = min(output_tokens, INT64_MAX)
        if self._dropped:
            attrs["loopgate.spans.dropped"] = self._dropped
        error: str | None = None
        if status == "failed":
            attrs[ERROR_TYPE] = reason or "failed"
            error = self.last_error or reason or "the run failed"
        return SpanEnd(key=RUN, end_ns=ts, attributes=attrs, error=error)

    def _full(self) -> bool:
        return len(self._tools) + len(self._approvals) >= self.max_open_spans

    def _now(self) -> int:
        """The time of whatever ends now: the newest event's."""
        last = self.last
        return last.ts if last is not None else self.trace.created_at

    def _annotation(self, envelope: Envelope) -> SpanEvent:
        data = envelope.data if isinstance(envelope.data, dict) else {}
        attrs: Attributes = {}
        for name, value in data.items():
            if name == "content" and not self.content:
                continue  # a steering message is user content
            key = f"loopgate.{snake_case(name)}"
            if isinstance(value, str):
                attrs[key] = self._clip(value)
            elif isinstance(value, bool | float) or is_int64(value):
                attrs[key] = value
        return SpanEvent(key=RUN, name=envelope.kind, ts=envelope.ts, attributes=attrs)

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


def _interrupted(key: str, ts: int, why: str) -> SpanEnd:
    return SpanEnd(key=key, end_ns=ts, attributes={ERROR_TYPE: "interrupted"}, error=why)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
