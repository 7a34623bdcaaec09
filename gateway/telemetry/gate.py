"""The observer that hands a sink a traced run's events one call at a time.

A model call's deltas change a span only at the first (its time to first chunk) unless
content capture is on, and deltas are most of a stream. So the gate narrows the run's
``observed`` kinds to :data:`SPAN_KINDS` after that first delta and widens it again at the
next ``llm_request``: the hub skips the calls in between. The trace worker's sink does not
need it (its relay finds first deltas itself when it flushes); the inline book and tests do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from contracts.envelope import Envelope
from gateway.telemetry.projector import DELTAS, SPAN_KINDS, TRACED_KINDS

if TYPE_CHECKING:
    from gateway.hub import Run


class DeltaGate:
    __slots__ = ("content", "put", "run")

    def __init__(self, run: Run, put: Callable[[Envelope], None], content: bool) -> None:
        self.run = run
        self.put = put
        self.content = content
        run.observed = SPAN_KINDS

    def event(self, env: Envelope) -> None:
        kind = env.kind
        if kind in DELTAS:
            if not self.content:
                self.run.observed = SPAN_KINDS
        elif kind == "llm_request":
            self.run.observed = TRACED_KINDS
        elif kind == "llm_response":
            self.run.observed = SPAN_KINDS
        self.put(env)
