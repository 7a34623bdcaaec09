"""Stuck detection: a turn repeating the same tool calls, or swinging between two sets of them.

A round's *signature* is its tool calls, each a name and its arguments in canonical JSON (keys
sorted), in call order. ``repeat_call_limit`` rounds in a row with one signature is a repeat;
``oscillation_limit`` A-B cycles in a row (A, B, A, B …, A ≠ B) an oscillation. The first time
the model is told, in a system note; if the pattern goes on, the turn stops (unless a
``tool_made_progress`` hook answers ``Proceed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec

from .config import LoopConfig

if TYPE_CHECKING:
    from .streaming import ParsedCall

Pattern = Literal["repeat", "oscillation"]
_encoder = msgspec.json.Encoder(order="sorted")
# What the model is told; the second placeholder names the calls (clipped for a long list).
NOTE = {
    "repeat": (
        "You have made the same tool call{s} ({calls}) {n} rounds in a row, with the same "
        "arguments; the results will not change. Use the results you have, try something "
        "different, or give your answer. Repeating it again ends the turn."
    ),
    "oscillation": (
        "You are alternating between the same two sets of tool calls ({calls}) for {n} "
        "rounds; the results will not change. Use the results you have, try something "
        "different, or give your answer. Going on like this ends the turn."
    ),
}
_MAX_NAMES_CHARS = 200


def signature(calls: list[ParsedCall]) -> bytes:
    return _encoder.encode([(p.call.name, p.call.arguments) for p in calls])


class StuckWatch:
    """The signatures of a turn's tool rounds, and whether the model was told it is stuck."""

    __slots__ = ("_limits", "_names", "_rounds", "told")

    def __init__(self, cfg: LoopConfig) -> None:
        self._limits = (cfg.repeat_call_limit, cfg.oscillation_limit)
        self._rounds: list[bytes] = []
        self._names: list[list[str]] = []
        self.told = False

    def observe(self, calls: list[ParsedCall]) -> tuple[Pattern, int] | None:
        """Count one tool round; the pattern it completes and over how many rounds, if any."""
        self._rounds.append(signature(calls))
        self._names.append([p.call.name for p in calls])
        repeat, cycles = self._limits
        rounds = self._rounds
        keep = max(repeat, 2 * cycles)
        del rounds[:-keep], self._names[:-keep]
        if len(rounds) >= repeat and len(set(rounds[-repeat:])) == 1:
            return "repeat", repeat
        tail = rounds[-2 * cycles :]
        if (
            len(tail) == 2 * cycles
            and tail[0] != tail[1]
            and all(sig == tail[i % 2] for i, sig in enumerate(tail))
        ):
            return "oscillation", 2 * cycles
        return None

    def note(self, pattern: Pattern, rounds: int) -> str:
        """What the model is told the first time."""
        names = self._names[-1] if pattern == "repeat" else self._names[-2] + self._names[-1]
        shown = ", ".join(dict.fromkeys(names))
        if len(shown) > _MAX_NAMES_CHARS:
            shown = shown[:_MAX_NAMES_CHARS] + "…"
        return NOTE[pattern].format(
            s="s" if len(self._names[-1]) > 1 else "", calls=shown, n=rounds
        )
