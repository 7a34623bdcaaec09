"""LoopEvent envelopes → AG-UI 1.0 events: a sans-IO state machine for one run and one client.

Shape of a run on the wire::

    RUN_STARTED
      STEP_STARTED "round 1"
        REASONING_START / REASONING_MESSAGE_START / …CONTENT / …END / REASONING_END
        TEXT_MESSAGE_START / …CONTENT / …END
        TOOL_CALL_START / TOOL_CALL_ARGS / TOOL_CALL_END     (one burst per tool_call_start)
        TOOL_CALL_RESULT
        CUSTOM loopgate.<kind>                               (everything without an AG-UI home)
      STEP_FINISHED "round 1"
      …
    RUN_FINISHED | RUN_ERROR

The real client rejects RUN_FINISHED while any message, reasoning item, tool call or step is open,
so every transition that leaves a segment closes it first, and terminal paths close everything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from adapters.agui.events import (
    UNSET,
    AguiEvent,
    CancelledOutcome,
    Custom,
    Interrupt,
    InterruptOutcome,
    ReasoningEnd,
    ReasoningMessageContent,
    ReasoningMessageEnd,
    ReasoningMessageStart,
    ReasoningStart,
    RunError,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    SuccessOutcome,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
    TokenUsage,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallResult,
    ToolCallStart,
)
from adapters.agui.interrupts import interrupt_id
from contracts.contract import is_terminal_completion, load_contract
from contracts.envelope import Envelope
from contracts.events import completion_status, tool_failed
from contracts.gateway_events import DECISIONS
from contracts.projector import ProjectorContext

# The version loopgate speaks. Declared in RUN_STARTED instead of echoing the request: the client
# accepts only "major.minor" ("1.0.0" draws an "uninterpretable" warning), and echoing a newer
# version than we speak would be a false claim.
PROTOCOL_VERSION = "1.0"

CUSTOM_PREFIX = "loopgate."

# llm_response usage key → AG-UI TokenUsage field (summed per model over the run).
_USAGE_KEYS = (
    ("promptTokens", "input_tokens"),
    ("completionTokens", "output_tokens"),
    ("totalTokens", "total_tokens"),
    ("reasoningTokens", "reasoning_tokens"),
    ("cachedTokens", "cached_input_tokens"),
)

# Where a prompt for the user may be found, in a completion payload or a tool call's arguments.
_MESSAGE_KEYS = ("message", "question", "prompt")

_CUSTOM_NAMES = {kind: CUSTOM_PREFIX + kind for kind in load_contract().event_kinds}

_Handler = Callable[["AguiProjector", Envelope, int], "list[AguiEvent] | None"]
_json = msgspec.json.Encoder()


def _str_or_unset(value: object) -> Any:
    return value if type(value) is str else UNSET


def _without_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class AguiProjector:
    """One run, one AG-UI client. ``start``/``feed``/``close`` return events; no I/O."""

    def __init__(self, context: ProjectorContext) -> None:
        self._run_id = context.run_id
        self._thread_id = context.thread_id
        # A client that names a protocolVersion speaks 1.0; 0.0.x clients reject 1.0-only fields.
        self._v1 = context.protocol_version is not None
        self._trace = {
            key: value
            for key, value in (
                ("traceId", context.options.get("trace_id")),
                ("traceparent", context.options.get("traceparent")),
            )
            if type(value) is str
        }
        self._msg = f"{context.run_id}:msg:"
        self._reasoning = f"{context.run_id}:reasoning:"
        self._result = f"{context.run_id}:result:"
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        # The assistant message this round's tool calls belong to (parentMessageId).
        self._assistant_id: str | None = None
        self._step: str | None = None
        self._steps = 0
        # call id → arguments: the pending list for frontend tools, the question of an ask_user.
        self._started_calls: dict[str, Any] = {}
        self._answered_calls: set[str] = set()
        self._usage: dict[str | None, dict[str, int]] = {}
        self._last_error: str | None = None
        self._model: str | None = None  # named by stage_start / llm_request, for usage
        self._last_budget: dict[str, Any] | None = None
        self._last_ts: Any = UNSET
        self._done = False

    # -- the Projector protocol --------------------------------------------------------------

    def start(self) -> list[AguiEvent]:
        return [
            RunStarted(
                thread_id=self._thread_id,
                run_id=self._run_id,
                protocol_version=PROTOCOL_VERSION if self._v1 else UNSET,
                metadata=self._trace or UNSET,
            )
        ]

    def feed(self, envelope: Envelope) -> list[AguiEvent]:
        if self._done:
            return []
        self._last_ts = ts = envelope.ts // 1_000_000
        kind = envelope.kind
        try:
            # Deltas inside an open segment are most of any stream: served inline, without the
            # handler call (the benchmark's hot path).
            if kind == "content_delta":
                mid = self._text_id
                if mid is not None:
                    delta = envelope.data["delta"]
                    if type(delta) is str:
                        return [TextMessageContent(message_id=mid, delta=delta, timestamp=ts)]
            elif kind == "reasoning_delta":
                mid = self._reasoning_id
                if mid is not None:
                    delta = envelope.data["delta"]
                    if type(delta) is str:
                        return [ReasoningMessageContent(message_id=mid, delta=delta, timestamp=ts)]
            handler = _HANDLERS.get(kind)
            out = handler(self, envelope, ts) if handler is not None else None
        except (AttributeError, KeyError, TypeError, ValueError):
            # Ingested garbage in a known field: keep the event, as CUSTOM, and keep the run alive.
            out = None
        return out if out is not None else [self._custom(envelope, ts)]

    @property
    def finished(self) -> bool:
        """True once a terminal event went out: the run's end, or an approval interrupt that
        ends this stream while the run waits (the client resumes it with its answer)."""
        return self._done

    def close(self, reason: str | None = None) -> list[AguiEvent]:
        if self._done:
            return []
        ts = self._last_ts
        out: list[AguiEvent] = []
        self._close_segments(out, ts)
        self._close_step(out, ts)
        self._done = True
        out.append(
            RunError(
                message=f"run ended without completion: {reason or 'truncated'}",
                code="truncated",
                usage=self._usage_entries(),
                timestamp=ts,
            )
        )
        return out

    # -- segments, steps ---------------------------------------------------------------------

    def _custom(self, env: Envelope, ts: int) -> Custom:
        kind = env.kind
        name = _CUSTOM_NAMES.get(kind) or CUSTOM_PREFIX + kind
        return Custom(name=name, value=env.data, timestamp=ts)

    def _close_segments(self, out: list[AguiEvent], ts: Any) -> None:
        rid = self._reasoning_id
        if rid is not None:
            out.append(ReasoningMessageEnd(message_id=rid, timestamp=ts))
            out.append(ReasoningEnd(message_id=rid, timestamp=ts))
            self._reasoning_id = None
        tid = self._text_id
        if tid is not None:
            out.append(TextMessageEnd(message_id=tid, timestamp=ts))
            self._text_id = None

    def _open_step(self, out: list[AguiEvent], ts: int) -> None:
        self._steps += 1
        self._step = name = f"round {self._steps}"
        out.append(StepStarted(step_name=name, timestamp=ts))

    def _close_step(self, out: list[AguiEvent], ts: Any) -> None:
        """Finish the open step; open text/reasoning must be closed first."""
        if self._step is not None:
            out.append(StepFinished(step_name=self._step, timestamp=ts))
            self._step = None
        self._assistant_id = None

    def _enter_round(self, ts: int) -> list[AguiEvent]:
        """Close open text/reasoning; open a step if the stream had no stage_start for it."""
        out: list[AguiEvent] = []
        if self._text_id is not None or self._reasoning_id is not None:
            self._close_segments(out, ts)
        if self._step is None:
            self._open_step(out, ts)
        return out

    # -- handlers (return None to degrade the envelope to CUSTOM) ----------------------------

    def _on_content(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        delta = env.data.get("delta")
        if type(delta) is not str:
            return None
        mid = self._text_id
        if mid is not None:
            return [TextMessageContent(message_id=mid, delta=delta, timestamp=ts)]
        out = self._enter_round(ts)
        self._text_id = self._assistant_id = mid = self._msg + str(env.seq)
        out.append(TextMessageStart(message_id=mid, role="assistant", timestamp=ts))
        out.append(TextMessageContent(message_id=mid, delta=delta, timestamp=ts))
        return out

    def _on_reasoning(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        delta = env.data.get("delta")
        if type(delta) is not str:
            return None
        mid = self._reasoning_id
        if mid is not None:
            return [ReasoningMessageContent(message_id=mid, delta=delta, timestamp=ts)]
        out = self._enter_round(ts)
        self._reasoning_id = mid = self._reasoning + str(env.seq)
        out.append(ReasoningStart(message_id=mid, timestamp=ts))
        out.append(ReasoningMessageStart(message_id=mid, role="reasoning", timestamp=ts))
        out.append(ReasoningMessageContent(message_id=mid, delta=delta, timestamp=ts))
        return out

    def _on_tool_start(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        data = env.data
        call_id, name = data.get("id"), data.get("name")
        args = data.get("arguments")
        if type(call_id) is not str or type(name) is not str:
            return None
        if isinstance(args, str):
            delta = args  # already JSON text (some loops stream it that way)
        elif args is None:
            delta = "{}"
        else:
            # An object as the contract says, or a foreign JSON value: the call is real either
            # way, so it is shown with that value as its arguments' JSON text.
            delta = _json.encode(args).decode()
        out = self._enter_round(ts)
        parent = self._assistant_id
        if parent is None:
            # No text this round: group the round's calls under one deterministic assistant id
            # instead of one assistant message per call.
            self._assistant_id = parent = self._msg + str(env.seq)
        self._started_calls[call_id] = args
        out.append(
            ToolCallStart(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=parent, timestamp=ts
            )
        )
        out.append(ToolCallArgs(tool_call_id=call_id, delta=delta, timestamp=ts))
        out.append(ToolCallEnd(tool_call_id=call_id, timestamp=ts))
        return out

    def _on_tool_result(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        data = env.data
        call_id = data.get("id")
        if type(call_id) is not str or call_id in self._answered_calls:
            # A second answer to one call would mint a second tool message; keep it as CUSTOM.
            return None
        error = data.get("error")
        if tool_failed(env.kind, data):
            detail = error if error is not None else data.get("resultPreview")
            content = f"error: {_text(detail) if detail is not None else 'tool failed'}"
        else:
            preview = data.get("resultPreview")
            if type(preview) is str:
                content = preview
            else:
                result = data.get("result")
                content = "" if result is None else _text(result)
        out = self._enter_round(ts)
        self._answered_calls.add(call_id)
        out.append(
            ToolCallResult(
                message_id=self._result + str(env.seq),
                tool_call_id=call_id,
                content=content,
                role="tool",
                timestamp=ts,
            )
        )
        return out

    def _on_stage_start(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        self._note_model(env.data)
        out: list[AguiEvent] = []
        if self._text_id is not None or self._reasoning_id is not None:
            self._close_segments(out, ts)
        self._close_step(out, ts)
        self._open_step(out, ts)
        out.append(self._custom(env, ts))
        return out

    def _on_llm_request(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        self._note_model(env.data)
        out: list[AguiEvent] = []
        if self._step is None:
            self._open_step(out, ts)
        out.append(self._custom(env, ts))
        return out

    def _on_llm_response(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        data = env.data
        counts: dict[str, int] | None = None
        for src, dst in _USAGE_KEYS:
            value = data.get(src)
            if type(value) is int and value >= 0:
                if counts is None:
                    model = data.get("model")
                    key = model if type(model) is str else self._model
                    counts = self._usage.setdefault(key, {})
                counts[dst] = counts.get(dst, 0) + value
        # The model's turn is over: what it streamed is complete.
        out = self._enter_round(ts)
        out.append(self._custom(env, ts))
        return out

    def _note_model(self, data: dict[str, Any]) -> None:
        model = data.get("model")
        if type(model) is str:
            self._model = model

    def _on_round_end(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        """stage_complete and completion{executing}: the round is over."""
        out: list[AguiEvent] = []
        if self._text_id is not None or self._reasoning_id is not None:
            self._close_segments(out, ts)
        out.append(self._custom(env, ts))
        self._close_step(out, ts)
        return out

    def _on_error(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        message = env.data.get("message")
        if type(message) is str:
            self._last_error = message
        return None

    def _on_permission(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        """A tool waits for approval: a 1.0 client gets an interrupt, answered by resume."""
        data = env.data
        request_id, call = data.get("requestId"), data.get("toolCall")
        if not self._v1 or type(request_id) is not str or not isinstance(call, dict):
            return None
        name = call.get("name")
        options = data.get("options")
        decisions = options if isinstance(options, list) and options else list(DECISIONS[:4])
        out: list[AguiEvent] = []
        self._close_segments(out, ts)
        out.append(self._custom(env, ts))
        self._close_step(out, ts)
        self._done = True
        interrupt = Interrupt(
            id=interrupt_id(self._run_id, "permission", request_id),
            reason="tool_approval",
            message=f"Allow {name}?" if type(name) is str else "Allow this tool call?",
            tool_call_id=_str_or_unset(call.get("id")),
            response_schema={
                "type": "object",
                "properties": {"decision": {"type": "string", "enum": decisions}},
                "required": ["decision"],
            },
        )
        out.append(
            RunFinished(
                thread_id=self._thread_id,
                run_id=self._run_id,
                outcome=InterruptOutcome(interrupts=[interrupt]),
                usage=self._usage_entries(),
                timestamp=ts,
            )
        )
        return out

    def _on_budget(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        self._last_budget = env.data
        return None

    def _on_completion(self, env: Envelope, ts: int) -> list[AguiEvent] | None:
        data = env.data
        if not is_terminal_completion("completion", data):
            return self._on_round_end(env, ts)
        out: list[AguiEvent] = []
        self._close_segments(out, ts)
        out.append(self._custom(env, ts))
        self._close_step(out, ts)
        self._done = True
        out.append(self._terminal(data, env, ts))
        return out

    # -- terminal mapping --------------------------------------------------------------------

    def _terminal(self, data: dict[str, Any], env: Envelope, ts: int) -> AguiEvent:
        status = completion_status(data)
        reason = data.get("reason")
        usage = self._usage_entries()
        if status == "failed":
            error = data.get("error")
            message = (
                error
                if type(error) is str
                else self._last_error or (reason if type(reason) is str else None) or "run failed"
            )
            code = reason if type(reason) is str and reason else "failed"
            return RunError(message=message, code=code, usage=usage, timestamp=ts)
        finished = RunFinished(
            thread_id=self._thread_id, run_id=self._run_id, usage=usage, timestamp=ts
        )
        if status == "completed":
            return finished
        if status == "cancelled":
            if self._v1:
                finished.outcome = CancelledOutcome()
            else:
                finished.result = _without_none({"status": "cancelled", "reason": reason})
            return finished
        if status == "waiting_user":
            if reason == "client_tool":
                pending = self._pending_calls(data)
                if self._v1:
                    finished.outcome = SuccessOutcome(pending_tool_call_ids=pending or UNSET)
                else:
                    finished.result = {
                        "status": "waiting_user",
                        "reason": "client_tool",
                        "pendingToolCallIds": pending,
                    }
                return finished
            interrupts = self._interrupts(data, env)
            if self._v1:
                finished.outcome = InterruptOutcome(interrupts=interrupts)
            else:
                finished.result = _without_none(
                    {
                        "status": "waiting_user",
                        "reason": reason,
                        "interrupts": msgspec.to_builtins(interrupts),
                    }
                )
            return finished
        # budget_exhausted, and statuses newer than this code: finished, and the result says how.
        finished.result = _without_none(
            {
                "status": status,
                "reason": reason,
                "budget": self._last_budget if status == "budget_exhausted" else None,
            }
        )
        return finished

    def _pending_calls(self, data: dict[str, Any]) -> list[str]:
        named = data.get("pendingToolCallIds")
        if isinstance(named, list) and all(type(i) is str for i in named):
            return named
        return [c for c in self._started_calls if c not in self._answered_calls]

    def _interrupts(self, data: dict[str, Any], env: Envelope) -> list[Interrupt]:
        reason = data.get("reason")
        reason = reason if type(reason) is str and reason else "waiting_user"
        listed = data.get("interrupts")
        if isinstance(listed, list) and listed:
            interrupts = [
                _interrupt(item, interrupt_id(self._run_id, "interrupt", env.seq, i), reason)
                for i, item in enumerate(listed)
                if isinstance(item, dict)
            ]
            if interrupts:
                return interrupts
        interrupt = _interrupt(data, interrupt_id(self._run_id, "interrupt", env.seq), reason)
        if interrupt.message is UNSET and type(interrupt.tool_call_id) is str:
            # An ask_user-style tool suspended the turn: its arguments hold the question.
            args = self._started_calls.get(interrupt.tool_call_id)
            if isinstance(args, dict):
                interrupt.message = _str_or_unset(_first(args, _MESSAGE_KEYS))
        return [interrupt]

    def _usage_entries(self) -> Any:
        if not self._v1:
            return UNSET
        entries = [
            TokenUsage(model=model if model is not None else UNSET, **counts)
            for model, counts in self._usage.items()
            if counts
        ]
        return entries or UNSET


def _first(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = data.get(key)
        if type(value) is str and value:
            return value
    return None


def _interrupt(data: dict[str, Any], default_id: str, default_reason: str) -> Interrupt:
    ident = data.get("interruptId", data.get("id"))
    reason = data.get("reason")
    message = _first(data, _MESSAGE_KEYS)
    return Interrupt(
        id=ident if type(ident) is str and ident else default_id,
        reason=reason if type(reason) is str and reason else default_reason,
        message=_str_or_unset(message),
        tool_call_id=_str_or_unset(data.get("toolCallId")),
    )


def _text(value: Any) -> str:
    return value if type(value) is str else _json.encode(value).decode()


_HANDLERS: dict[str, _Handler] = {
    "content_delta": AguiProjector._on_content,
    "reasoning_delta": AguiProjector._on_reasoning,
    "tool_call_start": AguiProjector._on_tool_start,
    "tool_call_result": AguiProjector._on_tool_result,
    "tool_error": AguiProjector._on_tool_result,
    "stage_start": AguiProjector._on_stage_start,
    "llm_request": AguiProjector._on_llm_request,
    "llm_response": AguiProjector._on_llm_response,
    "stage_complete": AguiProjector._on_round_end,
    "completion": AguiProjector._on_completion,
    "error": AguiProjector._on_error,
    "budget_exhausted": AguiProjector._on_budget,
    "permission_request": AguiProjector._on_permission,
}
