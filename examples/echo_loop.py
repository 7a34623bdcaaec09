"""The smallest plugged loop: it answers with what it was told (README's two-agent config).

Serve it alone with ``loopgate serve --loop examples.echo_loop:loop``, or beside other agents
as ``loop = "examples.echo_loop:loop"`` in an ``[agents.NAME]`` table (docs/agents.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


async def loop(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    yield {"kind": "content_delta", "data": {"delta": f"you said: {ctx.input}"}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}
