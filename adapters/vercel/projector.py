"""LoopEvent envelopes → Vercel AI SDK UI message chunks: the run projector's hooks.

A run is one assistant message::

    start {messageId, messageMetadata: {loopgate: {runId, threadId}}}
      start-step                                         one step per round
        reasoning-start / reasoning-delta … / reasoning-end
        text-start / text-delta … / text-end
        tool-input-start / tool-input-delta / tool-input-available   (one burst per call)
        tool-output-available | tool-output-error
        data-loopgate-<kind>                             everything without a chunk of its own
      finish-step
      steering-message                                   a steer, between the rounds
      …
    finish {finishReason, messageMetadata: {loopgate: {status, reason, usage, waiting?}}}
    [DONE]

The loop's own tool calls are ``providerExecuted`` (the client's, the request's ``tools``, are
not): useChat's ``lastAssistantMessageIsCompleteWithToolCalls`` resends the chat once every
call of the last step without it has an output, so an unmarked call of the loop's made every
answer a new request. A stream that does not know the client's tools (``CLIENT_TOOLS`` absent)
marks a call once the loop answers it.

A failed run ends with ``error`` then ``finish`` (``error``); a cancelled one with ``abort``, as
the AI SDK's own server ends a stream it stopped; a stream cut short with ``error`` then
``finish`` (``interrupted``). The client's stream processor refuses a delta or an end whose
start it has not seen; the base closes every open part before the end.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UnsetType

from ...contracts import json_input
from ...contracts.contract import load_contract
from ...contracts.envelope import Envelope
from ...contracts.events import CompletionView, view_of
from ...contracts.history import waiting_calls
from ...contracts.projector import ProjectorContext
from ..shared.projector import CLIENT_TOOLS, TEXT, Call, RunProjector, Segment
from .chunks import (
    DONE,
    UNSET,
    Abort,
    Chunk,
    Data,
    Error,
    Finish,
    FinishStep,
    MessageMetadata,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    Start,
    StartStep,
    SteeringMessage,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    ToolInputAvailable,
    ToolInputDelta,
    ToolInputStart,
    ToolOutputAvailable,
    ToolOutputError,
)

# ProjectorContext.options key: the assistant message's id (the endpoint's choice: the
# continued message's own, or the run's id).
MESSAGE_ID = "messageId"

DATA_PREFIX = "data-loopgate-"
# Every round has these: sent as transient data parts (the client's onData sees them) so that
# they do not pile up in the message, which the client sends back with every request.
TRANSIENT = frozenset(
    {"stage_start", "llm_request", "llm_response", "stage_complete", "completion"}
)
_DATA_TYPES = {kind: DATA_PREFIX + kind for kind in load_contract().event_kinds}
# Completion finishReasons the AI SDK has a name of its own for.
_FINISH_REASONS = {"length": "length", "content_filter": "content-filter"}
_json = msgspec.json.Encoder()


class VercelProjector(RunProjector[Chunk]):
    """One run, one AI SDK client. ``start``/``feed``/``close`` return chunks; no I/O."""

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        given = context.options.get(MESSAGE_ID)
        self.message_id = given if isinstance(given, str) and given else context.run_id
        self._data_id = context.run_id + ":"
        named = context.options.get(CLIENT_TOOLS)
        self._client_tools = frozenset(named) if isinstance(named, list) else None
        self._round_text = False  # the open round said something
        # The open segment's delta chunk (chosen once per segment: deltas are the hot path).
        self._delta: type[TextDelta] | type[ReasoningDelta] = TextDelta

    # -- hooks: the run's parts --------------------------------------------------------------

    def on_start(self) -> list[Chunk]:
        ours = {"runId": self.run_id, "threadId": self.context.thread_id}
        return [Start(message_id=self.message_id, message_metadata={"loopgate": ours})]

    def passthrough(self, envelope: Envelope) -> list[Chunk]:
        kind = envelope.kind
        if kind == "steer":
            content = envelope.data.get("content")
            if type(content) is str:
                steer_id = f"{self.run_id}:steer:{envelope.seq}"
                return [SteeringMessage(id=steer_id, parts=[TextPart(content)])]
        return [
            Data(
                type=_DATA_TYPES.get(kind) or DATA_PREFIX + kind,
                id=self._data_id + str(envelope.seq),
                data=envelope.data,
                transient=True if kind in TRANSIENT else UNSET,
            )
        ]

    def open_round(self, number: int, envelope: Envelope) -> list[Chunk]:
        self._round_text = False
        return [StartStep()]

    def close_round(self, number: int) -> list[Chunk]:
        return [FinishStep()]

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[Chunk]:
        sid = segment.id
        if segment.kind == TEXT:
            self._round_text = True
            self._delta = TextDelta
            return [TextStart(id=sid), TextDelta(id=sid, delta=delta)]
        self._delta = ReasoningDelta
        return [ReasoningStart(id=sid), ReasoningDelta(id=sid, delta=delta)]

    def close_segment(self, segment: Segment) -> list[Chunk]:
        return [TextEnd(id=segment.id) if segment.kind == TEXT else ReasoningEnd(id=segment.id)]

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[Chunk]:
        # Called through a local: CPython 3.11 does not specialise calling an instance
        # attribute, and this is the hot path.
        chunk = self._delta
        return [chunk(id=segment.id, delta=delta)]

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[Chunk]:
        text, value = _arguments(call.arguments)
        ours = self._runs_here(call)
        return [
            ToolInputStart(tool_call_id=call.id, tool_name=call.name, provider_executed=ours),
            ToolInputDelta(tool_call_id=call.id, input_text_delta=text),
            ToolInputAvailable(
                tool_call_id=call.id, tool_name=call.name, input=value, provider_executed=ours
            ),
        ]

    def announce_call(self, call: Call, envelope: Envelope) -> list[Chunk]:
        # Its arguments were never seen (None): shown as a start without arguments is.
        return self.on_tool_start(call, envelope)

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[Chunk]:
        data = envelope.data
        if failed:
            detail = data.get("error")
            if detail is None:
                detail = data.get("resultPreview")
            text = "the tool failed" if detail is None else _text(detail)
            return [ToolOutputError(tool_call_id=call.id, error_text=text, provider_executed=True)]
        # The whole result when the loop sent it (any JSON), else its preview. A call the loop
        # answered is the loop's, whether or not this stream knew it at its start.
        output = data.get("result")
        if output is None:
            output = data.get("resultPreview")
        return [ToolOutputAvailable(tool_call_id=call.id, output=output, provider_executed=True)]

    def close_call(self, call: Call, status: str) -> list[Chunk]:
        if status == "waiting_user":
            return []  # the client's to run (or the question's): it stays ``input-available``
        # Else the part would wait for an output forever. The gateway's answer, not the
        # client's: the run is over, nothing is to be sent back for it.
        text = f"the run ended before this tool call finished ({status})"
        return [ToolOutputError(tool_call_id=call.id, error_text=text, provider_executed=True)]

    # -- hooks: the end ----------------------------------------------------------------------

    def on_terminal(self, status: str, envelope: Envelope) -> list[Chunk]:
        out: list[Chunk] = []
        view = view_of(CompletionView, envelope.data)
        metadata = self._metadata(status, view.reason)
        waiting = waiting_calls(envelope.data)
        if waiting:  # an ask_user's: the next user message answers it (request.to_history)
            metadata["loopgate"]["waiting"] = list(waiting)
        if status == "failed":
            code = view.reason or "failed"
            message = view.error or self.last_error or _failure(code)
            out.append(Error(error_text=message))
            out.append(Finish(finish_reason="error", message_metadata=metadata))
        elif status == "cancelled":
            out.append(MessageMetadata(message_metadata=metadata))
            out.append(Abort(reason=view.reason or "cancelled"))
        else:
            if status == "waiting_user" and view.reason != "client_tool" and not self._round_text:
                question = self.question_asked(view, envelope)
                if question:
                    out += self._say(question, envelope)
            finish = self._finish_reason(status, envelope.data, view.reason)
            out.append(Finish(finish_reason=finish, message_metadata=metadata))
        out.append(DONE)
        return out

    def on_truncated(self, reason: str) -> list[Chunk]:
        return [
            Error(error_text=f"the run ended without a final answer ({reason})"),
            Finish(finish_reason="interrupted", message_metadata=self._metadata(None, reason)),
            DONE,
        ]

    # -- helpers -----------------------------------------------------------------------------

    def _runs_here(self, call: Call) -> bool | UnsetType:
        """``providerExecuted`` of a call's input: True for the loop's own tools, absent for
        the client's (its ``onToolCall`` runs them) and when the stream does not know which
        tools the client runs (its result, when the loop sends one, says so then)."""
        tools = self._client_tools
        return UNSET if tools is None or call.name in tools else True

    def _finish_reason(self, status: str, data: dict[str, Any], reason: str | None) -> str:
        """``tool-calls`` when the client has calls to run; ``length`` for a budget (tokens or
        rounds) or a model that hit its token limit; ``stop`` for a completed turn or one that
        waits on the user; ``other`` for statuses newer than this code."""
        if status == "waiting_user":
            return "tool-calls" if reason == "client_tool" else "stop"
        if status == "budget_exhausted":
            return "length"
        if status == "completed":
            given = data.get("finishReason")
            return _FINISH_REASONS.get(given, "stop") if isinstance(given, str) else "stop"
        return "other"

    def _metadata(self, status: str | None, reason: str | None) -> dict[str, Any]:
        tokens_in, tokens_out = self.usage_totals()
        ours: dict[str, Any] = {"status": status}
        if reason is not None:
            ours["reason"] = reason
        ours["usage"] = {
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "totalTokens": tokens_in + tokens_out,
        }
        return {"loopgate": ours}

    def _say(self, text: str, envelope: Envelope) -> list[Chunk]:
        """A text part of the message's own (after the last step)."""
        sid = f"{self.message_prefix}{envelope.seq}"
        self._round_text = True
        return [TextStart(id=sid), TextDelta(id=sid, delta=text), TextEnd(id=sid)]


def _arguments(arguments: Any) -> tuple[str, Any]:
    """A call's arguments as the input's JSON text and its value. Text (some loops stream the
    arguments encoded) is decoded when it is JSON and shown as it is when not; an orphan's,
    never seen, are ``{}``; a foreign value is the call's input whatever its type."""
    if arguments is None:
        return "{}", {}
    if isinstance(arguments, str):
        try:
            return arguments, json_input.decode(arguments)
        except ValueError:  # malformed or too deep: the text is the input
            return arguments, arguments
    return _json.encode(arguments).decode(), arguments


def _failure(reason: str) -> str:
    if reason == "truncated":  # the hub's end for a run whose loop stopped without one
        return "the run ended without a final answer (truncated)"
    return f"the run failed ({reason})"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _json.encode(value).decode()
