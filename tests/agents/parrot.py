"""A plugged Python loop for the two-agent tests: it repeats the prompt, so each answer tells
which agent gave it (the reference loop on the scripted model answers otherwise)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

PREFIX = "parrot says: "


async def loop(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    yield {"kind": "stage_start", "data": {"model": "parrot"}}
    yield {"kind": "llm_request", "data": {"round": 1, "attempt": 1}}
    yield {"kind": "content_delta", "data": {"delta": PREFIX}}
    yield {"kind": "content_delta", "data": {"delta": ctx.input}}
    yield {"kind": "llm_response", "data": {"round": 1, "attempt": 1}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}
