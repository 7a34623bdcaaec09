"""Numbers a client writes as text (headers, query parameters): ASCII digits, bounded length.

``str.isdigit`` is true for ``"²"`` and ``"٣"``, which ``int()`` then refuses or reads; and
``int()`` of 4,300 digits raises (CPython's limit on int/str conversion). So a client's number
is parsed here only: ASCII digits, at most :data:`MAX_DIGITS`, no larger than :data:`MAX_INT`
(what SQLite and every client's 64-bit integer hold), and refused in our own words otherwise.
"""

from __future__ import annotations

from .problem import HttpProblem

MAX_INT = (1 << 63) - 1
MAX_DIGITS = len(str(MAX_INT))
_SHOWN_CHARS = 24


def ascii_int(raw: str | None) -> int | None:
    """``raw`` as a non-negative integer, or None unless it is 1-19 ASCII digits ≤ MAX_INT."""
    if raw is None or not 0 < len(raw) <= MAX_DIGITS or not (raw.isascii() and raw.isdigit()):
        return None
    value = int(raw)
    return value if value <= MAX_INT else None


def shown(raw: str) -> str:
    """A client's value quoted in an error message, cut short if it is long."""
    return repr(raw if len(raw) <= _SHOWN_CHARS else raw[:_SHOWN_CHARS] + "…")


def int_param(raw: str | None, name: str, default: int, low: int, high: int) -> int:
    """A bounded integer parameter; 400 naming it when it is not one."""
    if raw is None:
        return default
    value = ascii_int(raw)
    if value is None or not low <= value <= high:
        raise HttpProblem(400, f"{name} must be an integer from {low} to {high}, got {shown(raw)}")
    return value


def cursor_param(raw: str | None, what: str = "the resume cursor") -> int:
    """A resume cursor (a seq: 0 = from the start); 400 when it is not one."""
    if raw is None:
        return 0
    value = ascii_int(raw)
    if value is None:
        raise HttpProblem(
            400,
            f"{what} must be a non-negative integer of at most {MAX_DIGITS} ASCII digits, "
            f"got {shown(raw)}",
        )
    return value
