"""Oddities: known payload fields with a foreign type, found and logged, never refused.

Real engines differ from the reference runtime (seed 001's Rust engine sends
``budget_exhausted {"budget": "tokens", "used": 5000}``; a newer one may send a completion status
this code does not know). The contract asks consumers to be tolerant, so an event is refused
only when its envelope is wrong (``kind`` not a string, ``data`` not an object). What else is
unexpected is carried through unchanged and logged once per run, so an operator can see what a
loop sends without a log line per event.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, NamedTuple

import msgspec

from .client_errors import describe_input_error
from .events import PAYLOAD_TYPES, budget_kind

# Kept per run while the run is remembered: enough to say what a loop does wrong, bounded.
MAX_ODDITIES_PER_RUN = 16
MAX_RUNS = 1024


class Oddity(NamedTuple):
    kind: str
    field: str  # the wire name, e.g. "delta"
    detail: str  # what was found, in msgspec's words (describes the input, never our code)


def oddities(kind: str, data: dict[str, Any]) -> list[Oddity]:
    """The known fields of ``data`` that do not have their contract type (empty for an unknown
    kind: unknown kinds are legal)."""
    typ = PAYLOAD_TYPES.get(kind)
    if typ is None:
        return []
    found: list[Oddity] = []
    try:
        msgspec.convert(data, typ, strict=True)
    except msgspec.ValidationError:
        # One field at a time, to name every odd field rather than the first.
        for field in msgspec.structs.fields(typ):
            name = field.encode_name
            if name not in data:
                if field.required:
                    found.append(Oddity(kind, name, "missing"))
                continue
            try:
                msgspec.convert(data[name], field.type, strict=True)
            except msgspec.ValidationError as exc:
                detail = describe_input_error(exc, root=name)
                if kind == "completion" and name == "status":
                    detail += "; any status but executing ends the turn"
                found.append(Oddity(kind, name, detail))
    if kind == "budget_exhausted" and budget_kind(data) is None:
        found.append(Oddity(kind, "kind", "names no budget (rounds or tokens) in kind or budget"))
    return found


class OddityLog:
    """Logs each (kind, field) oddity once per run; remembers at most ``max_runs`` runs (the
    oldest are forgotten) and ``max_per_run`` oddities of each."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        max_runs: int = MAX_RUNS,
        max_per_run: int = MAX_ODDITIES_PER_RUN,
    ) -> None:
        self.logger = logger
        self.max_runs = max_runs
        self.max_per_run = max_per_run
        self._seen: OrderedDict[str, set[tuple[str, str]]] = OrderedDict()

    def note(self, run_id: str, kind: str, data: dict[str, Any]) -> list[Oddity]:
        """Check one event; log what is new for this run. Returns the event's oddities."""
        found = oddities(kind, data)
        if not found:
            return found
        seen = self._seen.get(run_id)
        if seen is None:
            seen = self._seen[run_id] = set()
            while len(self._seen) > self.max_runs:
                self._seen.popitem(last=False)
        for oddity in found:
            key = (oddity.kind, oddity.field)
            if key in seen or len(seen) >= self.max_per_run:
                continue
            seen.add(key)
            self.logger.warning(
                "run %s: %s.%s is odd (%s); carried through as sent%s",
                run_id,
                oddity.kind,
                oddity.field,
                oddity.detail,
                "" if len(seen) < self.max_per_run else " (further oddities of this run unlogged)",
            )
        return found

    def forget(self, run_id: str) -> None:
        self._seen.pop(run_id, None)
