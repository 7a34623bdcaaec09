"""The run lifecycle every projector shares; a protocol is a subclass that fills in hooks.

A projector turns one run's envelopes into one protocol's messages and does no I/O
(docs/architecture.md). The hooks a protocol fills in, and the state they read, are in
adapters.shared.hooks; what is the same for every protocol is done here, once:

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
  protocol's ``announce_call`` with the result's id and tool name — then answered, so no client
  gets a result for a call it does not know. A result that names no tool cannot be announced
  and degrades. A stream that continues one the client already had passes the calls it saw in
  ``ProjectorContext.options[SEEN_CALLS]`` (see :func:`seen_calls`): those are known;
- **a hook that raises** is a bug in the protocol, not a payload to degrade: strict (the test
  suite, ``LOOPGATE_STRICT_PROJECTORS=1``) it propagates; otherwise it is logged once and the
  client's stream ends with the protocol's terminal error (``_failed``).

Each hook returns its messages; the base puts them in order, one list per event however many
parts it opens and closes. Ids derive from the run id and the seq of the envelope that opened a
part, so the output is deterministic and goldens are byte-stable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import traceback
from collections.abc import Callable
from typing import Any, ClassVar

from ...contracts.contract import TERMINAL_EXCLUDED, load_contract
from ...contracts.envelope import Envelope
from ...contracts.events import (
    PermissionRequestView,
    PermissionResultView,
    budget_kind,
    completion_status,
    tool_failed,
    view_of,
)
from ...contracts.gateway_events import PERMISSION_REQUEST, PERMISSION_RESULT
from ...contracts.projector import ProjectorContext
from .hooks import ProjectorHooks, W
from .parts import (
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

__all__ = [
    "CLIENT_TOOLS",
    "FAILED_REASON",
    "REASONING",
    "SEEN_CALLS",
    "STRICT_ENV",
    "TEXT",
    "TOOL_RESULTS",
    "Call",
    "ProjectorHooks",
    "RunProjector",
    "SeenCall",
    "Segment",
    "SegmentKind",
    "Usage",
    "seen_calls",
]

# Set to 1, a hook that raises propagates out of feed and close (RunProjector.strict).
STRICT_ENV = "LOOPGATE_STRICT_PROJECTORS"
# Why a stream ended early when a hook raised: the reason its terminal message gives.
FAILED_REASON = "internal_error"

log = logging.getLogger("loopgate.projector")

# A step shows one event (into the list it is given); False: nothing shown, the event degrades.
_Step = Callable[["RunProjector[Any]", Envelope, "list[Any]"], bool]

# Every kind the base knows (the others go to on_unknown).
_KNOWN = (*load_contract().event_kinds, PERMISSION_REQUEST, PERMISSION_RESULT)
# The event hooks of every round: one a protocol leaves alone is not called (it would only
# pass the event to passthrough, a call more on a path every round takes).
_ROUND_HOOKS = ("on_stage_start", "on_llm_request", "on_llm_response", "on_round_end")


class RunProjector(ProjectorHooks[W]):
    """One run, one client, one protocol: ``start``, ``feed``, ``close`` return messages.

    The hooks (adapters.shared.hooks) each return their messages: ``feed`` gives one list for
    an event, however many parts it opens and closes.
    """

    # False for a protocol that shows every envelope as it is (JSON-RPC, native SSE): the base
    # then only watches for the terminal completion, and tracks no part at no cost per event.
    tracks_parts: ClassVar[bool] = True
    # A hook that raises propagates (instead of ending this client's stream with the
    # protocol's terminal error and one log line): on for every projector when the
    # environment has LOOPGATE_STRICT_PROJECTORS=1, as the test suite does.
    strict: ClassVar[bool] = False
    # Which of _ROUND_HOOKS this class overrides: worked out for each class as it is made
    # (whatever it inherits), never an alias of a method.
    _shows: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        base = ProjectorHooks.__dict__
        cls._shows = frozenset(
            hook for hook in _ROUND_HOOKS if getattr(cls, hook) is not base[hook]
        )

    def __init__(self, context: ProjectorContext) -> None:
        self.context = context
        self.run_id = context.run_id
        self.finished = False
        self.broken = False
        self.last = None
        self.segment = None
        self.rounds = 0
        self.in_round = False
        self.calls = {}
        self.pending = {}
        self.model = None
        self.usage = {}
        self.budget = None
        self.budget_kind = None
        self.last_error = None
        self.message_prefix = f"{context.run_id}:msg:"
        # Built by seen_calls (the option is ours, not a client's).
        seen: dict[str, SeenCall] = context.options.get(SEEN_CALLS) or {}
        for call_id, call in seen.items():
            self.calls[call_id] = known = Call(call_id, call.name, None, 0)
            if not call.answered:
                self.pending[call_id] = known
        # The kind → step table, on the instance: read on every event, and a class attribute
        # read through an instance is not specialised by CPython 3.11 (a full type lookup
        # each time, a tenth of an event's cost).
        cls = type(self)
        self._tracks = cls.tracks_parts
        self._dispatch = _ALL_STEPS if self._tracks else _TERMINAL_STEPS
        self._shown = cls._shows
        self._strict = cls.strict or os.environ.get(STRICT_ENV) == "1"
        # Finish has begun (finished: it ended).
        self._ending = False
        self._reasoning_prefix = f"{context.run_id}:reasoning:"

    # --- the Projector protocol -----------------------------------------------------------

    def start(self) -> list[W]:
        return self.on_start()

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
                    return self.on_unknown(envelope)
            # A kind the base has no part in, or a payload whose key field is unusable: the
            # event goes to the protocol's passthrough, and the run goes on.
            return self.passthrough(envelope)
        except Exception as exc:
            return self._failed(exc, envelope, out)

    def close(self, reason: str | None = None) -> list[W]:
        """The stream stops without a terminal event: close what is open, then say so."""
        if self.finished:
            return []
        try:
            terminal = self.on_truncated(reason or "truncated")
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
            out += self.on_finish(status)
            segment = self.segment
            if segment is not None:
                self._end_segment(out, segment)
            if envelope is not None:
                out += self.passthrough(envelope)
            pending = self.pending
            while pending:
                call = next(iter(pending.values()))
                out += self.close_call(call, status)
                del pending[call.id]
            if self.in_round:
                self._end_round(out)
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

        def attempt(hook: Callable[..., list[W]], *args: Any) -> None:
            # Logged once above; the client gets what the other hooks show.
            with contextlib.suppress(Exception):
                out.extend(hook(*args))

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

    # --- the open parts ---------------------------------------------------------------------
    #
    # A part is recorded open once the hook that opens it returned, and closed once the hook
    # that closes it returned: when a hook raises, the state says what the client was shown,
    # and the stream ends from there. Whether a part is open is asked where these are called:
    # most events find nothing to close, and a call costs as much as the check.

    def _end_segment(self, out: list[W], segment: Segment) -> None:
        """Close ``segment``, the open one."""
        out += self.close_segment(segment)
        self.segment = None

    def _begin_round(self, out: list[W], envelope: Envelope) -> None:
        """Open the next round (none is open)."""
        out += self.open_round(self.rounds + 1, envelope)
        self.rounds += 1
        self.in_round = True

    def _end_round(self, out: list[W]) -> None:
        """Close the open round."""
        out += self.close_round(self.rounds)
        self.in_round = False

    def _inside_round(self, out: list[W], envelope: Envelope) -> None:
        """What a part of a round needs: the open segment closed, and a round open."""
        segment = self.segment
        if segment is not None:
            self._end_segment(out, segment)
        if not self.in_round:
            self._begin_round(out, envelope)

    # --- steps, one per kind (False: nothing shown, the event degrades to passthrough) ------

    def _open(self, envelope: Envelope, out: list[W]) -> bool:
        """A delta that opens a segment (one that continues its segment never gets here)."""
        delta = envelope.data.get("delta")
        if type(delta) is not str:
            return False
        # The other kind's segment is closed: a segment holds one kind of delta.
        if self.segment is not None or not self.in_round:
            self._inside_round(out, envelope)
        if envelope.kind == TEXT:
            segment = Segment(TEXT, self.message_prefix + str(envelope.seq))
        else:
            segment = Segment(REASONING, self._reasoning_prefix + str(envelope.seq))
        out += self.open_segment(segment, delta, envelope)
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
        out += self.on_tool_start(call, envelope)
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
            out += self.announce_call(call, envelope)
            self.calls[call_id] = call
        out += self.on_tool_result(call, envelope, tool_failed(envelope.kind, data))
        self.pending.pop(call_id, None)
        return True

    def _stage_start(self, envelope: Envelope, out: list[W]) -> bool:
        model = envelope.data.get("model")
        if type(model) is str and model:
            self.model = model
        segment = self.segment
        if segment is not None:
            self._end_segment(out, segment)
        if self.in_round:
            self._end_round(out)
        self._begin_round(out, envelope)
        if "on_stage_start" in self._shown:
            out += self.on_stage_start(envelope)
        else:
            out += self.passthrough(envelope)
        return True

    def _llm_request(self, envelope: Envelope, out: list[W]) -> bool:
        model = envelope.data.get("model")
        if type(model) is str and model:
            self.model = model
        if not self.in_round:
            self._begin_round(out, envelope)
        if "on_llm_request" in self._shown:
            out += self.on_llm_request(envelope)
        else:
            out += self.passthrough(envelope)
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
        if "on_llm_response" in self._shown:
            out += self.on_llm_response(envelope)
        else:
            out += self.passthrough(envelope)
        return True

    def _round_end(self, envelope: Envelope, out: list[W]) -> bool:
        segment = self.segment
        if segment is not None:
            self._end_segment(out, segment)
        if "on_round_end" in self._shown:
            out += self.on_round_end(envelope)
        else:
            out += self.passthrough(envelope)
        if self.in_round:
            self._end_round(out)
        return True

    def _completion(self, envelope: Envelope, out: list[W]) -> bool:
        data = envelope.data
        if data.get("status") == TERMINAL_EXCLUDED:
            return self._round_end(envelope, out) if self._tracks else False
        status = completion_status(data)
        # Made before the parts close (a terminal may list the calls still in flight), sent
        # after them.
        terminal = self.on_terminal(status, envelope)
        out += self.finish(envelope, status, terminal)
        return True

    def _error(self, envelope: Envelope, out: list[W]) -> bool:
        message = envelope.data.get("message")
        if type(message) is str and message:
            self.last_error = message
        out += self.on_error(envelope)
        return True

    def _budget(self, envelope: Envelope, out: list[W]) -> bool:
        self.budget = envelope.data
        kind = budget_kind(envelope.data)  # "kind", or "budget" as seed 001's engine spells it
        if kind is not None:
            self.budget_kind = kind
        out += self.on_budget(envelope)
        return True

    def _permission_request(self, envelope: Envelope, out: list[W]) -> bool:
        view = view_of(PermissionRequestView, envelope.data)
        out += self.on_permission_request(view, envelope)
        return True

    def _permission_result(self, envelope: Envelope, out: list[W]) -> bool:
        view = view_of(PermissionResultView, envelope.data)
        out += self.on_permission_result(view, envelope)
        return True


# Kind → step; None for a kind the base has no part in (it goes to passthrough). Plain dicts,
# treated as immutable: the lookup is on every event's path.
_ALL_STEPS: dict[str, _Step | None] = {
    **dict.fromkeys(_KNOWN),
    "content_delta": RunProjector._open,
    "reasoning_delta": RunProjector._open,
    "tool_call_start": RunProjector._tool_start,
    "tool_call_result": RunProjector._tool_result,
    "tool_error": RunProjector._tool_result,
    "stage_start": RunProjector._stage_start,
    "llm_request": RunProjector._llm_request,
    "llm_response": RunProjector._llm_response,
    "stage_complete": RunProjector._round_end,
    "completion": RunProjector._completion,
    "error": RunProjector._error,
    "budget_exhausted": RunProjector._budget,
    PERMISSION_REQUEST: RunProjector._permission_request,
    PERMISSION_RESULT: RunProjector._permission_result,
}
# A projector that tracks no part (tracks_parts False) watches for the terminal completion.
_TERMINAL_STEPS: dict[str, _Step | None] = {
    **dict.fromkeys(_KNOWN),
    "completion": RunProjector._completion,
}
