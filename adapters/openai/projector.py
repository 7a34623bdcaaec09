"""LoopEvent envelopes → OpenAI ``chat.completion.chunk``s: the run projector's hooks.

A run is one assistant answer::

    chunk  delta {role: "assistant", …}                 the first chunk, whatever it carries
    chunk  delta {reasoning_content}                    reasoning_delta
    chunk  delta {content}                              content_delta
    chunk  delta {tool_calls: [{index, id, function}]}  a call to one of the request's tools
    chunk  delta {} + loopgate {seq, kind, data}        every other event (server tools, …)
    chunk  delta {} finish_reason + loopgate {completion}
    chunk  choices [] usage                             (when the client asked for usage)
    [DONE]

or, for a failed run, ``{"error": {message, type, code}}`` in place of the finish chunk.
Text and reasoning of later rounds continue the same message after a blank line. ``close``
ends a stream cut short with the error line. Ids and ``created`` come from the run, so the
output is deterministic.

Most chunks of a stream are a delta continuing the open text or reasoning, or an event on an
empty delta: those are :class:`Piece` and :class:`Carried`, the same JSON framed from this
run's templates (made with its first chunk) instead of encoded whole.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec
from msgspec import UnsetType

from ...contracts.envelope import Envelope
from ...contracts.events import CompletionView, view_of
from ...contracts.projector import ProjectorContext
from ..shared.projector import CLIENT_TOOLS, TEXT, Call, RunProjector, Segment
from .wire import (
    DONE,
    PIECE_TAIL,
    UNSET,
    Carried,
    Choice,
    Chunk,
    Delta,
    ErrorBody,
    Event,
    FunctionDelta,
    Piece,
    StreamError,
    ToolCallDelta,
    Usage,
    WireMessage,
)

# ProjectorContext.options keys, set by the endpoint from the request and the run.
MODEL = "model"  # the model the request named: every chunk echoes it
CREATED = "created"  # unix seconds; unset: the first event's time
INCLUDE_USAGE = "includeUsage"  # the usage chunk (default on; the endpoint says what was asked)

DEFAULT_MODEL = "loopgate"
CONTENT = "content"
REASONING = "reasoning_content"
# Between text (or reasoning) of two model responses: one message, its rounds as paragraphs.
PARAGRAPH = "\n\n"
# Completion reasons OpenAI has a finish_reason for, when a run completes with them.
_FINISH_AS_IS = ("length", "content_filter")
_json = msgspec.json.Encoder()


class OpenAIProjector(RunProjector[WireMessage]):
    """One run, one chat-completions client. ``start``/``feed``/``close`` return chunks."""

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        options = context.options
        self.completion_id = "chatcmpl-" + context.run_id
        model = options.get(MODEL)
        self.model_name = model if isinstance(model, str) and model else DEFAULT_MODEL
        created = options.get(CREATED)
        # -1 until known: the endpoint says, or the first event's time does.
        self.created = created if type(created) is int and created >= 0 else -1
        self._client_tools = frozenset(options.get(CLIENT_TOOLS) or ())
        self._usage_chunk = options.get(INCLUDE_USAGE, True) is not False
        self._first = True  # the next chunk is the first: it carries the role
        self._said_text = False
        self._said_reasoning = False
        self._round_text = False  # the open round said something
        self._handed: list[str] = []  # calls handed to the client as tool_calls, in order
        self._carried = 0  # the seq of the completion the finish chunk carries
        # The open segment's Piece template and field (made with the first chunk).
        self._heads: dict[str, bytes] = {}
        self._head = b""
        self._field = CONTENT
        self._carrier = b""  # Carried's template (made with the first chunk)

    # -- chunks ------------------------------------------------------------------------------

    def _chunk(
        self,
        delta: Delta,
        envelope: Envelope,
        finish: str | None = None,
        extension: Event | UnsetType = UNSET,
    ) -> Chunk:
        if self._first:
            self._first = False
            delta.role = "assistant"
            if self.created < 0:
                self.created = envelope.ts // 1_000_000_000
            self._templates()
        return Chunk(
            id=self.completion_id,
            created=self.created,
            model=self.model_name,
            choices=[Choice(index=0, delta=delta, finish_reason=finish)],
            loopgate=extension,
        )

    def _templates(self) -> None:
        """Piece's and Carried's templates: this run's chunk JSON, encoded once and cut."""
        empty = Choice(index=0, delta=Delta(content=""))
        whole = _json.encode(
            Chunk(
                id=self.completion_id, created=self.created, model=self.model_name, choices=[empty]
            )
        )
        # The last occurrence: the id and model come before it, and hold no raw quote.
        cut = whole.rindex(b'{"content":""}')
        head, tail = whole[:cut], whole[cut + len(b'{"content":""}') :]
        assert b"}" + tail == PIECE_TAIL  # the shape Piece renders
        self._heads = {
            CONTENT: head + b'{"content":',
            REASONING: head + b'{"reasoning_content":',
        }
        # An empty delta, and the extension before the object's end.
        self._carrier = head + b"{}" + tail[:-1] + b',"loopgate":'

    def _hand_over(self, call: Call, envelope: Envelope) -> Chunk:
        """A call for the client to run: one ``tool_calls`` delta, its arguments whole."""
        args = call.arguments
        if isinstance(args, str):
            text = args  # already JSON text (some loops send it so)
        elif args is None:
            text = "{}"  # an orphan's, never seen
        else:
            text = _json.encode(args).decode()
        index = len(self._handed)
        self._handed.append(call.id)
        handed = ToolCallDelta(index=index, id=call.id, function=FunctionDelta(call.name, text))
        return self._chunk(Delta(tool_calls=[handed]), envelope)

    # -- hooks: the run's parts --------------------------------------------------------------

    def passthrough(self, envelope: Envelope) -> list[WireMessage]:
        if envelope.seq == self._carried:
            return []  # the finish chunk carries it
        event = Event(envelope.seq, envelope.kind, envelope.data)
        if self._first:
            return [self._chunk(Delta(), envelope, extension=event)]
        return [Carried(self._carrier, event)]

    def open_round(self, number: int, envelope: Envelope) -> list[WireMessage]:
        self._round_text = False
        return []

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[WireMessage]:
        if segment.kind == TEXT:
            if self._said_text:
                delta = PARAGRAPH + delta
            self._said_text = self._round_text = True
            chunk = self._chunk(Delta(content=delta), envelope)
            self._field = CONTENT
        else:
            if self._said_reasoning:
                delta = PARAGRAPH + delta
            self._said_reasoning = True
            chunk = self._chunk(Delta(reasoning_content=delta), envelope)
            self._field = REASONING
        self._head = self._heads[self._field]
        return [chunk]

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[WireMessage]:
        # The hot path: the segment's first delta went through _chunk (the role, the time).
        return [Piece(self._head, self._field, delta)]

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[WireMessage]:
        if call.name in self._client_tools:
            return [self._hand_over(call, envelope)]
        # The loop's own tool: it runs it, the client sees the event.
        return self.passthrough(envelope)

    # -- hooks: the end ----------------------------------------------------------------------

    def on_terminal(self, status: str, envelope: Envelope) -> list[WireMessage]:
        view = view_of(CompletionView, envelope.data)
        if status == "failed":
            # The completion goes out as any event does, then the error line.
            code = view.reason or "failed"
            message = view.error or self.last_error or f"the run failed ({code})"
            error = ErrorBody(message=message, type="server_error", code=code)
            return [StreamError(error=error), DONE]
        self._carried = envelope.seq
        out: list[WireMessage] = []
        if status == "waiting_user":
            if view.reason == "client_tool":
                out += self._hand_pending(view, envelope)
            elif not self._round_text:
                question = self.question_asked(view, envelope)
                if question:
                    out.append(self._say(question, envelope))
        event = Event(envelope.seq, envelope.kind, envelope.data)
        finish = self._finish_reason(status, envelope.data)
        out.append(self._chunk(Delta(), envelope, finish, event))
        if self._usage_chunk:
            out.append(
                Chunk(
                    id=self.completion_id,
                    created=self.created,
                    model=self.model_name,
                    choices=[],
                    usage=self._usage(view),
                )
            )
        out.append(DONE)
        return out

    def on_truncated(self, reason: str) -> list[WireMessage]:
        message = f"the run ended without a final answer ({reason})"
        return [
            StreamError(error=ErrorBody(message=message, type="server_error", code=reason)),
            DONE,
        ]

    def _hand_pending(self, view: CompletionView, envelope: Envelope) -> list[WireMessage]:
        """The calls the turn waits for that the client has not been handed yet (a call to a
        tool the request did not name, or a stream whose request was not seen: a replay)."""
        named = view.pending_tool_call_ids
        handed: list[WireMessage] = []
        for call_id in named if named is not None else list(self.pending):
            call = self.calls.get(call_id)
            if call is not None and call_id not in self._handed:
                handed.append(self._hand_over(call, envelope))
        return handed

    def _say(self, text: str, envelope: Envelope) -> Chunk:
        if self._said_text:
            text = PARAGRAPH + text
        self._said_text = self._round_text = True
        return self._chunk(Delta(content=text), envelope)

    def _finish_reason(self, status: str, data: dict[str, Any]) -> str:
        """``tool_calls`` when the client has calls to answer; ``length`` for a budget (tokens
        or rounds) or a model that hit its token limit; ``stop`` for everything else."""
        if status == "waiting_user" and self._handed:
            return "tool_calls"
        if status == "budget_exhausted":
            return "length"
        reason = data.get("finishReason")
        if status == "completed" and reason in _FINISH_AS_IS:
            return cast(str, reason)
        return "stop"

    def _usage(self, view: CompletionView) -> Usage:
        """The run's tokens: the completion's totals when it has them, else the sum of its
        model responses' (a count never reported is 0: the SDKs require the three)."""
        summed_in, summed_out = self.usage_totals()
        prompt, completion = view.prompt_tokens, view.completion_tokens
        tokens_in = prompt if prompt is not None and prompt >= 0 else summed_in
        tokens_out = completion if completion is not None and completion >= 0 else summed_out
        usage = Usage(
            prompt_tokens=tokens_in,
            completion_tokens=tokens_out,
            total_tokens=tokens_in + tokens_out,
        )
        counts = self.usage.values()
        if any(u.reasoning_tokens is not None for u in counts):
            reasoning = sum(u.reasoning_tokens or 0 for u in counts)
            usage.completion_tokens_details = {"reasoning_tokens": reasoning}
        if any(u.cached_tokens is not None for u in counts):
            usage.prompt_tokens_details = {
                "cached_tokens": sum(u.cached_tokens or 0 for u in counts)
            }
        return usage
