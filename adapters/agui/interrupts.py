"""AG-UI interrupt ids: minted by the projector, parsed when a client resumes.

``<run id>:interrupt:<seq>[:<i>]`` — a turn that ended ``waiting_user`` (the terminal event's
seq; ``i`` numbers several interrupts of one completion). Resuming starts a new run.
``<run id>:permission:<request id>`` — a tool call waiting for approval in a run that is still
going. Resuming answers it and follows the same run on from there.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

InterruptKind = Literal["interrupt", "permission"]
_KINDS: tuple[InterruptKind, ...] = ("permission", "interrupt")


class InterruptRef(NamedTuple):
    run_id: str
    kind: InterruptKind
    # The terminal event's seq ("interrupt"), or the permission request's id ("permission").
    key: str
    # Which of the completion's listed ``interrupts`` ("interrupt" with several; else None).
    position: int | None = None


def interrupt_id(run_id: str, kind: InterruptKind, key: str | int, index: int | None = None) -> str:
    suffix = f":{index}" if index is not None else ""
    return f"{run_id}:{kind}:{key}{suffix}"


def parse_interrupt_id(value: str) -> InterruptRef | None:
    """The inverse of :func:`interrupt_id`; None for an id this gateway did not mint."""
    for kind in _KINDS:
        run_id, sep, key = value.rpartition(f":{kind}:")
        if not sep or not run_id or not key:
            continue
        if kind == "interrupt":
            seq, _, index = key.partition(":")
            if not _digits(seq) or (index and not _digits(index)):
                return None
            return InterruptRef(run_id, kind, seq, int(index) if index else None)
        return InterruptRef(run_id, kind, key)
    return None


def _digits(text: str) -> bool:
    # A seq or an index: ASCII, and short enough for int() (4,300 digits raise there).
    return 0 < len(text) <= 19 and text.isascii() and text.isdigit()
