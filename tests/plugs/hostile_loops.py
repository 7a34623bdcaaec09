"""Python loops that misuse the event loop or memory, for the tests of a real ``loopgate serve``.

The first word of the input picks the misdeed; the second is its size.
- ``huge N``: one event of N MiB, then a completion;
- ``block S``: blocks the thread it runs on for S seconds (``time.sleep``), then completes.

``AN_AGENT_LOOP`` is a loop of another shape (an AgentLoop object), for the start-up checks.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

MIB = 1 << 20


async def hostile(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    word, _, size = ctx.input.partition(" ")
    if word == "huge":
        result = "x" * (int(size) * MIB)
        data = {"id": "call_1", "name": "dump", "success": True, "resultPreview": result}
        yield {"kind": "tool_call_result", "data": data}
    elif word == "block":
        yield {"kind": "stage_start", "data": {"model": "blocking"}}
        time.sleep(float(size))  # noqa: ASYNC251 (the misdeed under test)
        yield {"kind": "content_delta", "data": {"delta": "woke up"}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


class _AgentLoop:
    """An object implementing the AgentLoop port itself (it drives its own runs)."""

    name = "an-agent-loop"
    untrusted = True

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def open(self, ctx: Any) -> Any:
        raise NotImplementedError


AN_AGENT_LOOP = _AgentLoop()
