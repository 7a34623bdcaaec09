"""LoopEvent envelopes → AG-UI 1.0 events: the run projector's hooks for one AG-UI client.

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

The real client rejects RUN_FINISHED while any message, reasoning item, tool call or step is open;
the base (adapters.shared.projector) closes them before every terminal event.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec

from ...contracts.contract import load_contract
from ...contracts.envelope import Envelope
from ...contracts.events import (
    CompletionView,
    PermissionRequestView,
    QuestionView,
    ToolCallView,
    view_of,
)
from ...contracts.gateway_events import DECISIONS
from ...contracts.projector import ProjectorContext
from ..shared.projector import TEXT, Call, RunProjector, Segment
from .events import (
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
from .interrupts import interrupt_id

# The version loopgate speaks. Declared in RUN_STARTED instead of echoing the request: the client
# accepts only "major.minor" ("1.0.0" draws an "uninterpretable" warning), and echoing a newer
# version than we speak would be a false claim.
PROTOCOL_VERSION = "1.0"

CUSTOM_PREFIX = "loopgate."
_CUSTOM_NAMES = {kind: CUSTOM_PREFIX + kind for kind in load_contract().event_kinds}
_json = msgspec.json.Encoder()


class AguiProjector(RunProjector[AguiEvent]):
    """One run, one AG-UI client. ``start``/``feed``/``close`` return events; no I/O.

    ``finished`` is also true after an approval interrupt, which ends this stream while the run
    waits (the client resumes it with its answer).
    """

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        self._thread_id = context.thread_id
        # A client that names a protocolVersion speaks 1.0; 0.0.x clients reject 1.0-only fields.
        self._v1 = context.protocol_version is not None
        self._trace = {
            key: value
            for key, value in (
                ("traceId", context.options.get("trace_id")),
                ("traceparent", context.options.get("traceparent")),
            )
            if isinstance(value, str)
        }
        self._result = f"{context.run_id}:result:"
        # The assistant message this round's tool calls belong to (parentMessageId).
        self._parent: str | None = None
        self._step = ""
        # The open segment's content event (chosen once per segment: deltas are the hot path).
        self._content: type[TextMessageContent] | type[ReasoningMessageContent] = TextMessageContent

    # -- hooks: the run's parts --------------------------------------------------------------

    def on_start(self) -> list[AguiEvent]:
        return [
            RunStarted(
                thread_id=self._thread_id,
                run_id=self.run_id,
                protocol_version=PROTOCOL_VERSION if self._v1 else UNSET,
                metadata=self._trace or UNSET,
            )
        ]

    def passthrough(self, envelope: Envelope) -> list[AguiEvent]:
        kind = envelope.kind
        name = _CUSTOM_NAMES.get(kind) or CUSTOM_PREFIX + kind
        return [Custom(name=name, value=envelope.data, timestamp=envelope.ts // 1_000_000)]

    def open_round(self, number: int, envelope: Envelope) -> list[AguiEvent]:
        self._step = name = f"round {number}"
        return [StepStarted(step_name=name, timestamp=envelope.ts // 1_000_000)]

    def close_round(self, number: int) -> list[AguiEvent]:
        self._parent = None
        last = self.last
        assert last is not None  # a round is open: an envelope came
        return [StepFinished(step_name=self._step, timestamp=last.ts // 1_000_000)]

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[AguiEvent]:
        ts, mid = envelope.ts // 1_000_000, segment.id
        if segment.kind == TEXT:
            self._parent = mid
            self._content = TextMessageContent
            return [
                TextMessageStart(message_id=mid, role="assistant", timestamp=ts),
                TextMessageContent(message_id=mid, delta=delta, timestamp=ts),
            ]
        self._content = ReasoningMessageContent
        return [
            ReasoningStart(message_id=mid, timestamp=ts),
            ReasoningMessageStart(message_id=mid, role="reasoning", timestamp=ts),
            ReasoningMessageContent(message_id=mid, delta=delta, timestamp=ts),
        ]

    def close_segment(self, segment: Segment) -> list[AguiEvent]:
        last = self.last
        assert last is not None  # a segment is open: an envelope came
        # Closing events carry the time of what closed them.
        ts, mid = last.ts // 1_000_000, segment.id
        if segment.kind == TEXT:
            return [TextMessageEnd(message_id=mid, timestamp=ts)]
        return [
            ReasoningMessageEnd(message_id=mid, timestamp=ts),
            ReasoningEnd(message_id=mid, timestamp=ts),
        ]

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[AguiEvent]:
        # Called through a local: CPython 3.11 does not specialise calling an instance
        # attribute, and this is the hot path.
        content = self._content
        return [content(message_id=segment.id, delta=delta, timestamp=envelope.ts // 1_000_000)]

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[AguiEvent]:
        args = call.arguments
        if isinstance(args, str):
            delta = args  # already JSON text (some loops stream it that way)
        elif args is None:
            delta = "{}"
        else:
            # An object as the contract says, or a foreign JSON value: the call is real either
            # way, so it is shown with that value as its arguments' JSON text.
            delta = _json.encode(args).decode()
        ts = envelope.ts // 1_000_000
        parent = self._parent
        if parent is None:
            # No text this round: group the round's calls under one deterministic assistant id
            # instead of one assistant message per call.
            self._parent = parent = self.message_prefix + str(envelope.seq)
        return [
            ToolCallStart(
                tool_call_id=call.id,
                tool_call_name=call.name,
                parent_message_id=parent,
                timestamp=ts,
            ),
            ToolCallArgs(tool_call_id=call.id, delta=delta, timestamp=ts),
            ToolCallEnd(tool_call_id=call.id, timestamp=ts),
        ]

    def announce_call(self, call: Call, envelope: Envelope) -> list[AguiEvent]:
        # Its arguments were never seen (None): shown as a start without arguments is.
        return self.on_tool_start(call, envelope)

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[AguiEvent]:
        data = envelope.data
        # A failure's detail and a result are shown whatever their JSON type; the preview when
        # it is the text it should be, else the result.
        if failed:
            detail = data.get("error")
            if detail is None:
                detail = data.get("resultPreview")
            content = f"error: {_text(detail) if detail is not None else 'tool failed'}"
        elif isinstance(preview := data.get("resultPreview"), str):
            content = preview
        else:
            result = data.get("result")
            content = "" if result is None else _text(result)
        return [
            ToolCallResult(
                message_id=self._result + str(envelope.seq),
                tool_call_id=call.id,
                content=content,
                role="tool",
                timestamp=envelope.ts // 1_000_000,
            )
        ]

    def on_permission_request(
        self, view: PermissionRequestView, envelope: Envelope
    ) -> list[AguiEvent]:
        """A tool waits for approval: a 1.0 client gets an interrupt, answered by resume."""
        if not self._v1 or view.request_id is None or view.tool_call is None:
            return self.passthrough(envelope)
        call = view_of(ToolCallView, view.tool_call)
        interrupt = Interrupt(
            id=interrupt_id(self.run_id, "permission", view.request_id),
            reason="tool_approval",
            message=f"Allow {call.name}?" if call.name is not None else "Allow this tool call?",
            tool_call_id=_or_unset(call.id),
            response_schema={
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "enum": view.options or list(DECISIONS[:4])}
                },
                "required": ["decision"],
            },
        )
        finished = RunFinished(
            thread_id=self._thread_id,
            run_id=self.run_id,
            outcome=InterruptOutcome(interrupts=[interrupt]),
            usage=self._usage(),
            timestamp=envelope.ts // 1_000_000,
        )
        return self.finish(envelope, "waiting_user", [finished])

    # -- hooks: the end ----------------------------------------------------------------------

    def on_truncated(self, reason: str) -> list[AguiEvent]:
        return [
            RunError(
                message=f"run ended without completion: {reason}",
                code="truncated",
                usage=self._usage(),
                timestamp=UNSET if self.last is None else self.last.ts // 1_000_000,
            )
        ]

    def on_terminal(self, status: str, envelope: Envelope) -> list[AguiEvent]:
        ts = envelope.ts // 1_000_000
        usage = self._usage()
        if status == "failed":
            view = view_of(CompletionView, envelope.data)
            message = view.error or self.last_error or view.reason or "run failed"
            code = view.reason or "failed"
            return [RunError(message=message, code=code, usage=usage, timestamp=ts)]
        finished = RunFinished(
            thread_id=self._thread_id, run_id=self.run_id, usage=usage, timestamp=ts
        )
        if status != "completed":
            self._say_how(finished, status, envelope)
        return [finished]

    def _say_how(self, finished: RunFinished, status: str, envelope: Envelope) -> None:
        """How a run that did not simply complete finished: an outcome for a 1.0 client, the
        ``result`` for an older one (and for statuses AG-UI has no outcome for)."""
        # The reason as sent goes into ``result`` (the loop's own words, whatever their type).
        reason = envelope.data.get("reason")
        if status == "cancelled":
            if self._v1:
                finished.outcome = CancelledOutcome()
            else:
                finished.result = _without_none({"status": "cancelled", "reason": reason})
        elif status == "waiting_user" and reason == "client_tool":
            named = view_of(CompletionView, envelope.data).pending_tool_call_ids
            pending = named if named is not None else list(self.pending)
            if self._v1:
                finished.outcome = SuccessOutcome(pending_tool_call_ids=pending or UNSET)
            else:
                finished.result = {
                    "status": "waiting_user",
                    "reason": "client_tool",
                    "pendingToolCallIds": pending,
                }
        elif status == "waiting_user":
            interrupts = self._interrupts(view_of(CompletionView, envelope.data), envelope)
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
        else:
            # budget_exhausted, and statuses newer than this code: finished, the result says how.
            budget = self.budget if status == "budget_exhausted" else None
            finished.result = _without_none({"status": status, "reason": reason, "budget": budget})

    # -- helpers -----------------------------------------------------------------------------

    def _interrupts(self, view: CompletionView, envelope: Envelope) -> list[Interrupt]:
        reason = view.reason or "waiting_user"
        seq = envelope.seq
        if view.interrupts:
            interrupts = [
                _interrupt(
                    view_of(QuestionView, cast(dict[str, Any], item)),
                    interrupt_id(self.run_id, "interrupt", seq, i),
                    reason,
                )
                for i, item in enumerate(view.interrupts)
                if isinstance(item, dict)
            ]
            if interrupts:
                return interrupts
        asked = view_of(QuestionView, envelope.data)
        interrupt = _interrupt(asked, interrupt_id(self.run_id, "interrupt", seq), reason)
        call = self.calls.get(asked.tool_call_id) if asked.tool_call_id is not None else None
        arguments: Any = call.arguments if call is not None else None
        if interrupt.message is UNSET and isinstance(arguments, dict):
            # An ask_user-style tool suspended the turn: its arguments hold the question.
            question = view_of(QuestionView, cast(dict[str, Any], arguments))
            interrupt.message = _or_unset(question.text())
        return [interrupt]

    def _usage(self) -> Any:
        if not self._v1:
            return UNSET
        entries: list[TokenUsage] = []
        for model, counts in self.usage.items():
            # A count the loop never reported stays absent (UNSET), never zero.
            entry = TokenUsage(model=UNSET if model is None else model)
            if counts.input_tokens is not None:
                entry.input_tokens = counts.input_tokens
            if counts.output_tokens is not None:
                entry.output_tokens = counts.output_tokens
            if counts.total_tokens is not None:
                entry.total_tokens = counts.total_tokens
            if counts.reasoning_tokens is not None:
                entry.reasoning_tokens = counts.reasoning_tokens
            if counts.cached_tokens is not None:
                entry.cached_input_tokens = counts.cached_tokens
            entries.append(entry)
        return entries or UNSET


def _interrupt(asked: QuestionView, default_id: str, default_reason: str) -> Interrupt:
    return Interrupt(
        id=asked.interrupt_id or asked.id or default_id,
        reason=asked.reason or default_reason,
        message=_or_unset(asked.text()),
        tool_call_id=_or_unset(asked.tool_call_id),
    )


def _or_unset(value: Any) -> Any:
    return UNSET if value is None else value


def _without_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _json.encode(value).decode()
