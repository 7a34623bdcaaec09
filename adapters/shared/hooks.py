"""The hooks a protocol's projector fills in, and the state of the run they read.

Every hook has one shape: it **returns the messages it makes**, a new list (empty: nothing to
show). The base (adapters.shared.projector, :class:`RunProjector`) decides when each runs and
puts what they return in order; a hook never sees another's messages. A hook that raises shows
nothing of what it was making: the base ends the client's stream from what the others showed.

Event hooks (``on_stage_start`` … ``on_permission_result``) show an event the base has read; by
default they show it as ``passthrough`` does, and a protocol that has no better way to show one
payload returns ``self.passthrough(envelope)`` too.

The state of the run a hook reads is declared here too (the base alone writes it).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

from ...contracts.envelope import Envelope
from ...contracts.events import (
    BudgetKind,
    CompletionView,
    PermissionRequestView,
    PermissionResultView,
    QuestionView,
    view_of,
)
from ...contracts.projector import ProjectorContext
from .parts import Call, Segment, Usage

W = TypeVar("W")


class ProjectorHooks(Generic[W]):
    """What a protocol overrides (every hook returns its messages) and the run it reads."""

    # The run as far as this stream knows it: the base (RunProjector) writes it, hooks read it.
    context: ProjectorContext
    run_id: str
    finished: bool  # the stream has ended
    broken: bool  # ... because a hook raised (logged once)
    last: Envelope | None  # the newest envelope
    segment: Segment | None  # the open text or reasoning segment
    rounds: int  # rounds opened so far
    in_round: bool  # round number ``rounds`` is open
    calls: dict[str, Call]  # every call this stream knows
    pending: dict[str, Call]  # the calls not answered yet, in start order
    model: str | None  # the newest model a stage or request named
    usage: dict[str | None, Usage]  # token counts per model
    budget: dict[str, Any] | None  # the last budget_exhausted payload
    budget_kind: BudgetKind | None  # the last budget one of them named
    last_error: str | None  # the last error message that was a message
    # Ids of messages a protocol mints: "<run id>:msg:<seq of the envelope that opened it>".
    message_prefix: str

    # --- the run's parts, opened and closed by the base -----------------------------------

    def on_start(self) -> list[W]:
        return []

    def passthrough(self, envelope: Envelope) -> list[W]:
        """The protocol's place for an event without a home of its own (default: none)."""
        return []

    def on_unknown(self, envelope: Envelope) -> list[W]:
        """A kind that is neither a loop kind nor a gateway kind."""
        return self.passthrough(envelope)

    def open_round(self, number: int, envelope: Envelope) -> list[W]:
        return []

    def close_round(self, number: int) -> list[W]:
        return []

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[W]:
        """Open ``segment`` and show its first delta."""
        return self.on_delta(segment, delta, envelope)

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[W]:
        """A delta continuing ``segment``: the hot path (most of any stream)."""
        return self.passthrough(envelope)

    def close_segment(self, segment: Segment) -> list[W]:
        return []

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[W]:
        return self.passthrough(envelope)

    def announce_call(self, call: Call, envelope: Envelope) -> list[W]:
        """An orphan's call, before its result (``envelope``): a call whose start this client
        never saw (``call.arguments`` is None). Default: nothing; a protocol that shows it as
        any start returns ``self.on_tool_start(call, envelope)``."""
        return []

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[W]:
        return self.passthrough(envelope)

    def close_call(self, call: Call, status: str) -> list[W]:
        """A call still in flight when the stream ends (``status``: the run's, as sent)."""
        return []

    def on_finish(self, status: str) -> list[W]:
        """First thing when the stream ends: close the parts only this protocol has."""
        return []

    def on_terminal(self, status: str, envelope: Envelope) -> list[W]:
        """The messages that end the run (a terminal completion; ``status`` as sent, or
        ``failed`` when it is not a string). They go out after the open parts close."""
        return []

    def on_truncated(self, reason: str) -> list[W]:
        """The messages that end a stream cut short (``reason``: why, ``truncated`` if unsaid)."""
        return []

    # --- loop events the base has read (default: as passthrough shows them) ---------------

    def on_stage_start(self, envelope: Envelope) -> list[W]:
        """A round's start (the base opened the round first)."""
        return self.passthrough(envelope)

    def on_llm_request(self, envelope: Envelope) -> list[W]:
        return self.passthrough(envelope)

    def on_llm_response(self, envelope: Envelope) -> list[W]:
        """The model's turn is over (the base closed its segment and counted its usage)."""
        return self.passthrough(envelope)

    def on_round_end(self, envelope: Envelope) -> list[W]:
        """``stage_complete`` or ``completion{executing}``: the round's close follows."""
        return self.passthrough(envelope)

    def on_error(self, envelope: Envelope) -> list[W]:
        return self.passthrough(envelope)

    def on_budget(self, envelope: Envelope) -> list[W]:
        return self.passthrough(envelope)

    def on_permission_request(self, view: PermissionRequestView, envelope: Envelope) -> list[W]:
        return self.passthrough(envelope)

    def on_permission_result(self, view: PermissionResultView, envelope: Envelope) -> list[W]:
        return self.passthrough(envelope)

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
