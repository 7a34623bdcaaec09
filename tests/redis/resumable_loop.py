"""A plugged Python loop that resumes (``--loop-resumable``): it says ``w0`` … ``w19``, a word
a tick, and a new attempt goes on after the words the run's events already have."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio

WORDS = 20
TICK_S = 0.15


async def words(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    said = sum(1 for event in ctx.events if event["kind"] == "content_delta")
    for i in range(said, WORDS):
        yield {"kind": "content_delta", "data": {"delta": f"w{i} "}}
        await anyio.sleep(TICK_S)
    yield {"kind": "completion", "data": {"status": "completed", "attempt": ctx.attempt}}
