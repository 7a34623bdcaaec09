"""Bounding text before it goes where size matters: the model's context, an event's preview."""

from __future__ import annotations

import msgspec

from ...contracts.messages import Message
from ...contracts.parts import text_of

PREVIEW_CHARS = 300


def preview(text: str) -> str:
    """At most ``PREVIEW_CHARS`` of ``text`` for an event, "…" when cut."""
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


def bounded(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to at most ``limit`` characters, and how many of its own it lost.

    What is kept is the head and the tail, around a line saying how much was left out: tools
    put what matters at either end (the header and first rows of a listing, the error and
    summary at the end of a log or a stack trace). The line counts toward ``limit``, so bounding
    twice changes nothing; a limit too small for it keeps the head alone.
    """
    total = len(text)
    if total <= limit:
        return text, 0
    marker = ""
    for _ in range(3):  # the count's digits change the line's length: settle it
        keep = limit - len(marker)
        marker = f"\n\n[… {total - keep:,} of {total:,} characters left out …]\n\n"
    keep = limit - len(marker)
    if keep < 2:
        return text[:limit], total - limit
    head = (keep + 1) // 2
    return f"{text[:head]}{marker}{text[total - (keep - head) :]}", total - keep


def bounded_messages(messages: list[Message], limit: int) -> list[Message]:
    """``messages`` with every tool result bounded (the same list when all fit).

    The loop bounds each result as it reports it; this catches the ones it did not report: a
    client's history, or a thread rebuilt from events that kept whole results.
    """
    if all(m.role != "tool" or len(text_of(m.content)) <= limit for m in messages):
        return messages
    return [
        m
        if m.role != "tool" or len(text_of(m.content)) <= limit
        else msgspec.structs.replace(m, content=bounded(text_of(m.content), limit)[0])
        for m in messages
    ]
