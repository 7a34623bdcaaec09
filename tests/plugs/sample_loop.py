"""A scripted loop for the plug tests, served in-process, over HTTP and as a stdio child.

The first word of the input picks what it does, so one gateway serves every scenario. It uses
only what every plug offers a loop: the run context's fields, cancellation, steering and
``ask_permission`` (the HTTP and stdio servers implement those over their wire protocols).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio

Event = dict[str, Any]
# How long "slow" waits between words for a cancel (it stops at once when one comes).
SLOW_TICK_S = 0.01
SLOW_MAX_WORDS = 3000


def event(kind: str, **data: Any) -> Event:
    return {"kind": kind, "data": data}


def done(status: str = "completed", reason: str = "stop") -> Event:
    return event("completion", status=status, reason=reason)


def script_for(text: str) -> list[Event]:
    """The exact events of the plain scenarios (the tests compare the wire against these)."""
    word = text.split(" ", 1)[0]
    if word == "tool":
        return [
            event("stage_start", model="sample"),
            event("llm_request", round=1, attempt=1),
            event("llm_response", round=1, attempt=1),
            event("tool_call_start", id="call_1", name="lookup", round=1, arguments={"q": "x"}),
            event(
                "tool_call_result",
                id="call_1",
                name="lookup",
                success=True,
                durationMs=1.0,
                resultPreview="42",
            ),
            event("stage_complete", round=1, toolCallCount=1),
            done("executing", "tool_calls"),
            event("llm_request", round=2, attempt=1),
            event("content_delta", delta="the answer "),
            event("content_delta", delta="is 42"),
            event("llm_response", round=2, attempt=1),
            done(),
        ]
    answer = f"you said: {text}"
    return [
        event("stage_start", model="sample"),
        event("llm_request", round=1, attempt=1),
        *(event("content_delta", delta=piece) for piece in _pieces(answer)),
        event("llm_response", round=1, attempt=1),
        done(),
    ]


def _starts(message: dict[str, Any], word: str) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.startswith(word)


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def _digest(part: dict[str, Any]) -> str:
    raw = base64.b64decode(part["data"])
    return f"{part['type']} {part['media_type']} {hashlib.sha256(raw).hexdigest()}"


async def sample(ctx: Any) -> AsyncIterator[Event]:
    text: str = ctx.input
    word = text.split(" ", 1)[0]
    if word == "slow":
        async for item in _slow(ctx):
            yield item
    elif word == "ask":
        yield event("stage_start", model="sample")
        decision = await ctx.ask_permission(
            {"id": "call_w", "name": "write", "arguments": {"path": "notes.md"}, "kind": "edit"}
        )
        yield event("content_delta", delta=f"decision: {decision}")
        yield done()
    elif word == "echo" or any(_starts(message, "echo") for message in ctx.messages):
        # The run request as the loop's wire carries it, for docs/loops.md's definitions.
        wire = {"input": ctx.input, "messages": ctx.messages, "tools": ctx.tools}
        yield event("content_delta", delta=json.dumps(wire, sort_keys=True))
        yield done()
    elif word == "hash":
        # The attachments as the loop got them: their bytes' SHA-256 (tests/attachments).
        digests = [_digest(p) for p in ctx.input_parts if p["type"] != "text"]
        yield event("content_delta", delta="\n".join(digests))
        yield done()
    elif word == "request":
        # What the loop was given, for the tests to check.
        seen = {
            "run_id": ctx.run_id,
            "thread_id": ctx.thread_id,
            "input": ctx.input,
            "messages": [[m["role"], m.get("content", "")] for m in ctx.messages],
            "tools": [t["name"] for t in ctx.tools],
            "config": ctx.config,
        }
        yield event("content_delta", delta=json.dumps(seen, sort_keys=True))
        yield done()
    elif word == "raise":
        yield event("stage_start", model="sample")
        raise RuntimeError("secret internals 1234")
    elif word == "garbage":
        yield 42  # type: ignore[misc]
    elif word == "nokind":
        yield {"data": {}}
    elif word == "badpayload":
        yield event("content_delta", delta=5)
    elif word == "silent":
        await anyio.sleep(3600)  # no first event: the gateway's first-event timeout ends it
    elif word == "early":
        yield event("content_delta", delta="and then nothing")
    else:
        for item in script_for(text):
            yield item


async def _slow(ctx: Any) -> AsyncIterator[Event]:
    yield event("stage_start", model="sample")
    for i in range(SLOW_MAX_WORDS):
        for steer in ctx.take_steers():
            yield event("steer", content=steer, round=1)
            yield event("content_delta", delta=f"[steered: {steer}] ")
        if ctx.cancelled:
            yield done("cancelled", "the loop saw the cancel")
            return
        yield event("content_delta", delta=f"w{i} ")
        with anyio.move_on_after(SLOW_TICK_S):
            await ctx.wait_cancelled()
    yield done()
