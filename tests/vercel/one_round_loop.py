"""A loop whose tool call and answer come in one round (one model step), as loops that run
their tools inside the model's turn do: ``loopgate serve --loop tests.vercel.one_round_loop:loop``.

The AI SDK reads such a step as the client's tool calls with their outputs ready, and resends
the chat, unless the stream marks the calls as the loop's own (``providerExecuted``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from loopgate.contracts.loop import RunContext


async def loop(ctx: RunContext) -> AsyncIterator[dict[str, Any]]:
    call_id = f"call_{ctx.run_id}"
    yield {"kind": "stage_start", "data": {"model": "one-round", "round": 1}}
    yield {"kind": "llm_request", "data": {"round": 1, "attempt": 1}}
    start = {"id": call_id, "name": "lookup", "round": 1, "arguments": {"query": ctx.input}}
    yield {"kind": "tool_call_start", "data": start}
    result = {"success": True, "durationMs": 1, "resultPreview": "42"}
    yield {"kind": "tool_call_result", "data": {"id": call_id, "name": "lookup", **result}}
    yield {"kind": "content_delta", "data": {"delta": "The lookup says 42."}}
    yield {"kind": "llm_response", "data": {"round": 1, "attempt": 1, "finishReason": "stop"}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop", "round": 1}}
