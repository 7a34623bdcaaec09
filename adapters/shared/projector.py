"""The run lifecycle every projector shares; a protocol is a subclass that fills in hooks.

A projector turns one run's envelopes into one protocol's messages and does no I/O
(docs/architecture.md). What is the same for every protocol is done here, once:

- **dispatch** by kind, in one table; typed reads: the base reads the fields it acts on (a
  tool call's id and name, a delta, usage counts, the model) and hooks read the rest through
  the tolerant views of contracts.events — a field of a foreign type is absent either way. An
  event whose key field is unusable (a delta that is not a string, a tool call without a
  string id) *degrades* to the protocol's ``passthrough`` (AG-UI CUSTOM, ACP nothing, JSON-RPC
  the envelope as it is), and so does a payload nobody foresaw; unknown kinds go to
  ``on_unknown``;
- the run's **open parts** — the round, one text or reasoning segment, the tool calls in flight —
  opened when the stream needs them and closed in one order before whatever ends the stream: a
  terminal completion, a stream cut short (``close``), or a protocol's own early end (AG-UI's
  approval interrupt, through ``finish``);
- **bookkeeping**: token usage per model, the last ``budget_exhausted`` payload and the budget it
  names, the last ``error`` message;
- **orphans**: a tool result whose start this client never saw is *announced* first — the
  protocol's call start (``announce_call``) with the result's id and tool name — then answered,
  so no client gets a result for a call it does not know. A result that names no tool cannot be
  announced and degrades. A stream that continues one the client already had passes the calls
  it saw in ``ProjectorContext.options[SEEN_CALLS]`` (see :func:`seen_calls`): those are known;
- **a hook that raises** is a bug in the protocol, not a payload to degrade: strict (the test
  suite, ``LOOPGATE_STRICT_PROJECTORS=1``) it propagates; otherwise it is logged once and the
  client's stream ends with the protocol's terminal error (``_failed``).

Hooks append messages to the list they are given (one list per event, however many parts it
opens and closes); an event hook returns False to decline, and the event then goes to
``passthrough``. Ids derive from the run id and the seq of the envelope that opened a part, so
the output is deterministic and goldens are byte-stable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, cast

from loopgate.adapters.shared.parts import (
    CLIENT_TOOLS,
    REASONING,
    SEEN_CALLS,
    TEXT,
    TOOL_RESULTS,
    Call,
    SeenCall,
    Segment,
    SegmentKind,
    Usage,
    seen_calls,
)
from loopgate.contracts.contract import TERMINAL_EXCLUDED, load_contract
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.events import (
    BudgetKind,
    CompletionView,
    PermissionRequestView,
    PermissionResultView,
    QuestionView,
    budget_kind,
    completion_status,
    tool_failed,
    view_of,
)
from loopgate.contracts.gateway_events import PERMISSION_REQUEST, PERMISSION_RESULT
from loopgate.contracts.projector import ProjectorContext

__all__ = [
    "CLIENT_TOOLS",
    "FAILED_REASON",
    "REASONING",
    "SEEN_CALLS",
    "STRICT_ENV",
    "TEXT",
    "TOOL_RESULTS",
    "Call",
    "RunProjector",
    "SeenCall",
    "Segment",
    "SegmentKind",
    "Usage",
    "seen_calls",
]

W = TypeVar("W")

# Set to 1, a hook that raises propagates out of feed and close (RunProjector.strict).
STRICT_ENV = "LOOPGATE_STRICT_PROJECTORS"
# Why a stream ended early when a hook raised: the reason its terminal message gives.
FAILED_REASON = "internal_error"

log = logging.getLogger("loopgate.projector")


_Step = Callable[["RunProjector[Any]", Envelope, "list[Any]"], bool]

# Every kind the base knows (the others go to on_unknown).
_KNOWN = (*load_contract().event_kinds, PERMISSION_REQUEST, PERMISSION_RESULT)
_SKIPPABLE = ("on_stage_start", "on_llm_request", "on_llm_response", "on_round_end")


class RunProjector(Generic[W]):
    """One run, one client, one protocol: ``start``, ``feed``, ``close`` return messages.

    Hooks append their messages to ``out``: ``feed`` makes one list for an event, however many
    parts it opens and closes. State a subclass reads (the base alone writes it):
    ``finished`` (``broken`` too: a hook raised), ``last`` (the newest envelope), ``segment``,
    ``rounds``/``in_round``, ``calls`` (every call this stream knows) and ``pending`` (those
    not answered yet, in start order), ``model``, ``usage``, ``budget``, ``budget_kind``,
    ``last_error``.
    """

    # False for a protocol that shows every envelope as it is (JSON-RPC, native SSE): the base
    # then only watches for the terminal completion, and tracks no part at no cost per event.
    tracks_parts: ClassVar[bool] = True
    # A hook that raises propagates (instead of ending this client's stream with the
    # protocol's terminal error and one log line): on for every projector when the
    # environment has LOOPGATE_STRICT_PROJECTORS=1, as the test suite does.
    strict: ClassVar[bool] = False
    # Kind → step, for this class (see the end of the class body).
    _steps: ClassVar[dict[str, _Step | None]]
    # The event hooks this protocol overrides: the others would decline, so they are not called
    # (on paths every round takes).
    _shows: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._steps = cls._all_steps if cls.tracks_parts else cls._terminal_steps
        cls._shows = frozenset(
            hook for hook in _SKIPPABLE if getattr(cls, hook) is not getattr(RunProjector, hook)
        )

    def __init__(self, context: ProjectorContext) -> None:
        # The class's tables, copied onto the instance: read on every event, and a class
        # attribute read through an instance is not specialised by CPython 3.11 (a full type
        # lookup each time, a tenth of an event's cost).
        cls = type(self)
        self._dispatch = cls._steps
        self._hooked = cls._shows
        self._tracks = cls.tracks_parts
        self._strict = cls.strict or os.environ.get(STRICT_ENV) == "1"
        self.context = context
        self.run_id = context.run_id
        self.finished = False
        # Ending: finish has begun. Broken: a hook raised (and it was logged).
        self._ending = False
        self.broken = False
        self.last: Envelope | None = None
        self.segment: Segment | None = None
        self.rounds = 0
        self.in_round = False
        self.calls: dict[str, Call] = {}
        self.pending: dict[str, Call] = {}
        self.model: str | None = None
        self.usage: dict[str | None, Usage] = {}
        self.budget: dict[str, Any] | None = None
        self.budget_kind: BudgetKind | None = None
        self.last_error: str | None = None
        # Ids of messages a protocol mints: "<run id>:msg:<seq of the envelope that opened it>".
        self.message_prefix = f"{context.run_id}:msg:"
        self._reasoning_prefix = f"{context.run_id}:reasoning:"
        # Built by seen_calls (the option is ours, not a client's).
        seen: dict[str, SeenCall] = context.options.get(SEEN_CALLS) or {}
        for call_id, call in seen.items():
            self.calls[call_id] = known = Call(call_id, call.name, None, 0)
            if not call.answered:
                self.pending[call_id] = known

    # --- the Projector protocol -----------------------------------------------------------

    def start(self) -> list[W]:
        out: list[W] = []
        self.on_start(out)
        return out

    def feed(self, envelope: Envelope) -> list[W]:
        if self.finished:
            return []
        self.last = envelope
        kind = envelope.kind
        data = envelope.data
        segment = self.segment
        if segment is not None and segment.kind == kind:
            # A delta continuing its segment: most of any stream, served without dispatch.
            try:
                delta = data.get("delta")
            except AttributeError:  # a payload that is not an object: it degrades, below
                delta = None
            if type(delta) is str:
                try:
                    return self.on_delta(segment, delta, envelope)
                except Exception as exc:
                    return self._failed(exc, envelope, [])
        out: list[W] = []
        try:
            # The steps read the payload as an object; one that is not (an envelope built in
            # Python: the decoders refuse it) degrades with the rest.
            if type(data) is dict:
                steps = self._dispatch
                step = steps.get(kind)
                if step is not None:
                    if step(self, envelope, out):
                        return out
                elif kind not in steps:
                    self.on_unknown(out, envelope)
                    return out
            # A kind the base has no part in, or a payload whose key field is unusable: the
            # event goes to the protocol's passthrough, and the run goes on.
            self.passthrough(out, envelope)
        except Exception as exc:
            return self._failed(exc, envelope, out)
        return out

    def close(self, reason: str | None = None) -> list[W]:
        """The stream stops without a terminal event: close what is open, then say so."""
        if self.finished:
            return []
        terminal: list[W] = []
        try:
            self.on_truncated(terminal, reason or "truncated")
        except Exception as exc:
            return self._failed(exc, "while ending the stream", [])
        return self.finish(None, "failed", terminal)

    def finish(self, envelope: Envelope | None, status: str, terminal: list[W]) -> list[W]:
        """End this stream: close every open part, then ``terminal``. ``envelope`` (the event
        that ends it, if any) goes out through ``passthrough`` inside the open round;
        ``status`` is the run's status as the closing hooks see it."""
        out: list[W] = []
        try:
            self._ending = True
            self.on_finish(out, status)
            segment = self.segment
            if segment is not None:
                self.close_segment(out, segment)
                self.segment = None
            if envelope is not None:
                self.passthrough(out, envelope)
            pending = self.pending
            while pending:
                call = next(iter(pending.values()))
                self.close_call(out, call, status)
                del pending[call.id]
            if self.in_round:
                self.close_round(out, self.rounds)
                self.in_round = False
        except Exception as exc:
            return self._failed(exc, "while ending the stream", out)
        self.finished = True
        out += terminal
        return out

    def _failed(self, exc: Exception, during: Envelope | str, out: list[W]) -> list[W]:
        """A hook raised: a bug in this protocol's projector, not in the run. In strict mode
        (``strict``; the test suite's) it propagates. Otherwise it is logged, once, and the
        stream ends here, rather than going on from a state the hook left half-made: the parts
        the client was shown opening are closed (each whose close works), then the protocol's
        terminal error. ``out`` is what the event showed before the hook raised."""
        if self._strict:
            raise exc
        if not self.broken:
            self.broken = True
            where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            # The exception's type and place, never its text: that may quote the payload.
            log.error(
                "%s raised %s%s %s of run %s; this client's stream of it is ended",
                type(self).__name__,
                type(exc).__name__,
                f" at {where.filename}:{where.lineno} in {where.name}()" if where else "",
                during if isinstance(during, str) else f"on {during.kind} (seq {during.seq})",
                self.run_id,
            )
        self.finished = True
        segment, calls, in_round, ending = (
            self.segment,
            list(self.pending.values()),
            self.in_round,
            self._ending,
        )
        self.segment, self.in_round, self._ending = None, False, True
        self.pending.clear()

        def attempt(hook: Callable[..., None], *args: Any) -> None:
            # Logged once above; the client gets what the other hooks show.
            with contextlib.suppress(Exception):
                hook(out, *args)

        if not ending:
            attempt(self.on_finish, "failed")
        if segment is not None:
            attempt(self.close_segment, segment)
        for call in calls:
            attempt(self.close_call, call, "failed")
        if in_round:
            attempt(self.close_round, self.rounds)
        attempt(self.on_truncated, FAILED_REASON)
        return out

    # --- hooks: messages for the parts the base opens and closes (appended to out) --------

    def on_start(self, out: list[W]) -> None:
        pass

    def passthrough(self, out: list[W], envelope: Envelope) -> None:
        """The protocol's place for an event without a home of its own (default: none)."""

    def on_unknown(self, out: list[W], envelope: Envelope) -> None:
        """A kind that is neither a loop kind nor a gateway kind."""
        self.passthrough(out, envelope)

    def open_round(self, out: list[W], number: int, envelope: Envelope) -> None:
        pass

    def close_round(self, out: list[W], number: int) -> None:
        pass

    def open_segment(self, out: list[W], segment: Segment, delta: str, envelope: Envelope) -> None:
        """Open ``segment`` and show its first delta."""
        out += self.on_delta(segment, delta, envelope)

    def close_segment(self, out: list[W], segment: Segment) -> None:
        pass

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[W]:
        """A delta continuing ``segment``: the hot path, so it returns its own list."""
        out: list[W] = []
        self.passthrough(out, envelope)
        return out

    def on_tool_start(self, out: list[W], call: Call, envelope: Envelope) -> None:
        self.passthrough(out, envelope)

    def announce_call(self, out: list[W], call: Call, envelope: Envelope) -> None:
        """An orphan's call, before its result (``envelope``): show it as a start would be."""

    def on_tool_result(self, out: list[W], call: Call, envelope: Envelope, failed: bool) -> None:
        self.passthrough(out, envelope)

    def close_call(self, out: list[W], call: Call, status: str) -> None:
        """A call still in flight when the stream ends (``status``: the run's, as sent)."""

    def on_finish(self, out: list[W], status: str) -> None:
        """First thing when the stream ends: close the parts only this protocol has."""

    def on_terminal(self, out: list[W], status: str, envelope: Envelope) -> None:
        """The messages that end the run (a terminal completion; ``status`` as sent, or
        ``failed`` when it is not a string)."""

    def on_truncated(self, out: list[W], reason: str) -> None:
        """The messages that end a stream cut short (``reason``: why, ``truncated`` if unsaid)."""

    # --- hooks: loop events (False: the event goes to passthrough) ------------------------

    def on_stage_start(self, out: list[W], envelope: Envelope) -> bool:
        return False

    def on_llm_request(self, out: list[W], envelope: Envelope) -> bool:
        return False

    def on_llm_response(self, out: list[W], envelope: Envelope) -> bool:
        return False

    def on_round_end(self, out: list[W], envelope: Envelope) -> bool:
        """``stage_complete`` or ``completion{executing}``: the round's close follows."""
        return False

    def on_error(self, out: list[W], envelope: Envelope) -> bool:
        return False

    def on_budget(self, out: list[W], envelope: Envelope) -> bool:
        return False

    def on_permission_request(
        self, out: list[W], view: PermissionRequestView, envelope: Envelope
    ) -> bool:
        return False

    def on_permission_result(
        self, out: list[W], view: PermissionResultView, envelope: Envelope
    ) -> bool:
        return False

    # --- totals -----------------------------------------------------------------------------

    def question_asked(self, view: CompletionView, envelope: Envelope) -> str | None:
        """What the user is asked, when the turn waits for an answer in words: the
        completion's, its interrupts', or the suspending tool's (an ``ask_user`` call's)."""
        asked = view_of(QuestionView, envelope.data).text()
        if asked is None and view.interrupts:
            texts = [
                text
                for item in view.interrupts
                if isinstance(item, dict)
                and (text := view_of(QuestionView, cast(dict[str, Any], item)).text())
            ]
            asked = "\n".join(texts) or None
        if asked is None and view.tool_call_id is not None:
            call = self.calls.get(view.tool_call_id)
            if call is not None and isinstance(call.arguments, dict):
                asked = view_of(QuestionView, cast(dict[str, Any], call.arguments)).text()
        return asked

    def usage_totals(self) -> tuple[int, int]:
        """Input and output tokens summed over every model."""
        counts = self.usage.values()
        return (
            sum(u.input_tokens or 0 for u in counts),
            sum(u.output_tokens or 0 for u in counts),
        )

    # --- steps, one per kind (False: degrade to passthrough) ------------------------------
    #
    # Every event takes these paths, so the opening and closing of parts is written out flat:
    # a helper call costs as much as the work it would hide. A part is recorded open once the
    # hook that opens it returned, and closed once the hook that closes it returned: when a
    # hook raises, the state says what the client was shown, and the stream ends from there.

    def _inside_round(self, out: list[W], envelope: Envelope) -> None:
        """Close the open segment and open a round if none is: what a part of a round needs."""
        segment = self.segment
        if segment is not None:
            self.close_segment(out, segment)
            self.segment = None
        if not self.in_round:
            self.open_round(out, self.rounds + 1, envelope)
            self.rounds += 1
            self.in_round = True

    def _open(self, envelope: Envelope, out: list[W]) -> bool:
        """A delta that opens a segment (one that continues its segment never gets here)."""
        delta = envelope.data.get("delta")
        if type(delta) is not str:
            return False
        segment = self.segment
        if segment is not None:  # the other kind's: a segment holds one kind of delta
            self.close_segment(out, segment)
            self.segment = None
        if not self.in_round:
            self.open_round(out, self.rounds + 1, envelope)
            self.rounds += 1
            self.in_round = True
        if envelope.kind == TEXT:
            segment = Segment(TEXT, self.message_prefix + str(envelope.seq))
        else:
            segment = Segment(REASONING, self._reasoning_prefix + str(envelope.seq))
        self.open_segment(out, segment, delta, envelope)
        self.segment = segment
        return True

    def _tool_start(self, envelope: Envelope, out: list[W]) -> bool:
        data = envelope.data
        call_id, name = data.get("id"), data.get("name")
        if type(call_id) is not str or type(name) is not str:
            return False
        if self.segment is not None or not self.in_round:
            self._inside_round(out, envelope)
        call = Call(call_id, name, data.get("arguments"), envelope.seq)
        self.on_tool_start(out, call, envelope)
        self.calls[call_id] = self.pending[call_id] = call
        return True

    def _tool_result(self, envelope: Envelope, out: list[W]) -> bool:
        data = envelope.data
        call_id = data.get("id")
        if type(call_id) is not str:
            return False
        call = self.pending.get(call_id)
        name = data.get("name")
        if call is None and (call_id in self.calls or type(name) is not str):
            # A second answer to one call, or an orphan that names no tool to announce.
            return False
        if self.segment is not None or not self.in_round:
            self._inside_round(out, envelope)
        if call is None:
            assert isinstance(name, str)
            call = Call(call_id, name, None, envelope.seq)
            self.announce_call(out, call, envelope)
            self.calls[call_id] = call
        self.on_tool_result(out, call, envelope, tool_failed(envelope.kind, data))
        self.pending.pop(call_id, None)
        return True

    def _stage_start(self, envelope: Envelope, out: list[W]) -> bool:
        model = envelope.data.get("model")
        if type(model) is str and model:
            self.model = model
        segment = self.segment
        if segment is not None:
            self.close_segment(out, segment)
            self.segment = None
        if self.in_round:
            self.close_round(out, self.rounds)
            self.in_round = False
        self.open_round(out, self.rounds + 1, envelope)
        self.rounds += 1
        self.in_round = True
        if "on_stage_start" not in self._hooked or not self.on_stage_start(out, envelope):
            self.passthrough(out, envelope)
        return True

    def _llm_request(self, envelope: Envelope, out: list[W]) -> bool:
        model = envelope.data.get("model")
        if type(model) is str and model:
            self.model = model
        if not self.in_round:
            self.open_round(out, self.rounds + 1, envelope)
            self.rounds += 1
            self.in_round = True
        if "on_llm_request" not in self._hooked or not self.on_llm_request(out, envelope):
            self.passthrough(out, envelope)
        return True

    def _llm_response(self, envelope: Envelope, out: list[W]) -> bool:
        data = envelope.data
        model = data.get("model")
        key = model if type(model) is str and model else self.model
        usage = self.usage.get(key)
        if usage is not None:
            usage.add(data)
        elif (usage := Usage()).add(data):
            self.usage[key] = usage
        # The model's turn is over: what it streamed is complete.
        if self.segment is not None or not self.in_round:
            self._inside_round(out, envelope)
        if "on_llm_response" not in self._hooked or not self.on_llm_response(out, envelope):
            self.passthrough(out, envelope)
        return True

    def _round_end(self, envelope: Envelope, out: list[W]) -> bool:
        segment = self.segment
        if segment is not None:
            self.close_segment(out, segment)
            self.segment = None
        if "on_round_end" not in self._hooked or not self.on_round_end(out, envelope):
            self.passthrough(out, envelope)
        if self.in_round:
            self.close_round(out, self.rounds)
            self.in_round = False
        return True

    def _completion(self, envelope: Envelope, out: list[W]) -> bool:
        data = envelope.data
        if data.get("status") == TERMINAL_EXCLUDED:
            return self._round_end(envelope, out) if self._tracks else False
        status = completion_status(data)
        # Worked out before the parts close: a terminal may list the calls still in flight.
        terminal: list[W] = []
        self.on_terminal(terminal, status, envelope)
        out += self.finish(envelope, status, terminal)
        return True

    def _error(self, envelope: Envelope, out: list[W]) -> bool:
        message = envelope.data.get("message")
        if type(message) is str and message:
            self.last_error = message
        return self.on_error(out, envelope)

    def _budget(self, envelope: Envelope, out: list[W]) -> bool:
        self.budget = envelope.data
        kind = budget_kind(envelope.data)  # "kind", or "budget" as seed 001's engine spells it
        if kind is not None:
            self.budget_kind = kind
        return self.on_budget(out, envelope)

    def _permission_request(self, envelope: Envelope, out: list[W]) -> bool:
        view = view_of(PermissionRequestView, envelope.data)
        return self.on_permission_request(out, view, envelope)

    def _permission_result(self, envelope: Envelope, out: list[W]) -> bool:
        view = view_of(PermissionResultView, envelope.data)
        return self.on_permission_result(out, view, envelope)

    # Kind → step; None for a kind the base has no part in (it goes to passthrough). Plain
    # dicts, treated as immutable: the lookup is on every event's path.
    _all_steps: ClassVar[dict[str, _Step | None]] = {
        **dict.fromkeys(_KNOWN),
        "content_delta": _open,
        "reasoning_delta": _open,
        "tool_call_start": _tool_start,
        "tool_call_result": _tool_result,
        "tool_error": _tool_result,
        "stage_start": _stage_start,
        "llm_request": _llm_request,
        "llm_response": _llm_response,
        "stage_complete": _round_end,
        "completion": _completion,
        "error": _error,
        "budget_exhausted": _budget,
        PERMISSION_REQUEST: _permission_request,
        PERMISSION_RESULT: _permission_result,
    }
    _terminal_steps: ClassVar[dict[str, _Step | None]] = {
        **dict.fromkeys(_KNOWN),
        "completion": _completion,
    }
    _steps = _all_steps
