"""What the trace worker's sink does to a batch before it is encoded (no I/O).

The hub hands the worker's queue a traced run's events with a C-level append, filtered by
kind only (:data:`~gateway.telemetry.projector.SPAN_KINDS`): no Python runs per event on the
hub's event loop as it happens. What the inline mode decides per event, the relay decides
here, per batch, when the sink flushes:

- a model call's first delta (its time to first chunk) is looked up in the run's own event
  list when the call's end (or the next request, or the run's end) comes through, and sent
  just before it;
- content fields the worker would ignore (content capture off) are left out; with content
  capture on, every delta is queued and those outside a model call are left out.

Per-run messages (run opened, delivery closed) are built by the hub side when they happen:
deferred to the flush, the same work on data no longer in the cache made tracing a quarter
more expensive (the recorded streams' overhead went from +14 % to +17 %).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contracts.envelope import Envelope
from gateway.telemetry.projector import CONTENT_FIELDS, DELTAS
from gateway.telemetry.wire import RunSummary

if TYPE_CHECKING:
    from gateway.hub import Run

# With content capture off, content fields longer than this (or not text: their size is
# unknown until encoded) are left out of what the worker is sent: it would only ignore them.
SLIM_ABOVE_CHARS = 1_024
# Runs whose end never came through (their summary was lost to a full queue) are forgotten
# once they are finished and the relay follows more than this many runs.
PRUNE_ABOVE = 4_096


# What prepare does with an envelope, by kind (most kinds: nothing).
_SLIM, _REQUEST, _RESPONSE = 1, 2, 3
_SPECIAL = {kind: _SLIM for kind in CONTENT_FIELDS} | {
    "llm_request": _REQUEST,
    "llm_response": _RESPONSE,
}


class Relay:
    def __init__(self, content: bool) -> None:
        self.content = content
        # Traced runs by id, for their event lists (until their summary comes through).
        self.runs: dict[str, Run] = {}
        # Run id → seq of its model request whose first delta is still to be found.
        self._pending: dict[str, int] = {}
        # With content capture on: runs inside a model call.
        self._in_call: set[str] = set()

    def follow(self, run: Run) -> None:
        if not self.content:  # with content on, every delta of a model call is sent
            self.runs[run.id] = run

    def prepare(self, batch: list[Any]) -> list[Any]:
        """The messages to encode, in order."""
        out: list[Any] = []
        append = out.append
        pending = self._pending
        special = _SPECIAL
        content = self.content
        in_call = self._in_call
        for m in batch:
            if type(m) is Envelope:
                if content:
                    # Every delta is queued; only those inside a model call are content.
                    kind = m.kind
                    if kind in DELTAS:
                        if m.run_id not in in_call:
                            continue
                    elif kind == "llm_request":
                        in_call.add(m.run_id)
                    elif kind == "llm_response":
                        in_call.discard(m.run_id)
                    append(m)
                    continue
                action = special.get(m.kind)
                if action is not None:
                    if action is _SLIM:
                        m = slim(m)
                    elif action is _REQUEST:
                        if m.run_id in pending:  # a retry: the first attempt's delta first
                            self._first_delta(m.run_id, m.seq, append)
                        pending[m.run_id] = m.seq
                    elif m.run_id in pending:  # _RESPONSE
                        self._first_delta(m.run_id, m.seq, append)
            elif type(m) is RunSummary:
                # Sent as the run ends, before its terminal event: a model call cut short by
                # the end may still have had a first delta.
                if m.run_id in pending:
                    self._first_delta(m.run_id, None, append)
                self.runs.pop(m.run_id, None)
                in_call.discard(m.run_id)
            append(m)
        if len(self.runs) > PRUNE_ABOVE:
            self._prune()
        return out

    def _first_delta(
        self, run_id: str, before_seq: int | None, append: Callable[[Any], None]
    ) -> None:
        after_seq = self._pending.pop(run_id)
        run = self.runs.get(run_id)
        if run is None:
            return
        events = run.events
        # seq n is events[n - 1]: the request's successors up to (not with) ``before_seq``.
        end = len(events) if before_seq is None else min(before_seq - 1, len(events))
        for i in range(after_seq, end):
            env = events[i]
            if env.kind in DELTAS:
                append(slim(env))
                return

    def _prune(self) -> None:
        for run_id, run in list(self.runs.items()):
            if run.finished:
                self.runs.pop(run_id, None)
                self._pending.pop(run_id, None)


def slim(env: Envelope) -> Envelope:
    """The envelope without big content fields (a tool result can be megabytes: ~2 ms to
    encode and pipe, to be ignored). Short text stays: copying costs more than sending it."""
    data = env.data
    fields = CONTENT_FIELDS.get(env.kind)
    if not fields:
        return env
    copy = None
    for key in fields:
        value = data.get(key)
        if value is not None and (type(value) is not str or len(value) > SLIM_ABOVE_CHARS):
            if copy is None:
                copy = dict(data)
            del copy[key]
    return env if copy is None else Envelope(env.run_id, env.seq, env.ts, env.kind, copy)
