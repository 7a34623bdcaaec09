"""Loops for the attachment tests: one that takes every kind and answers with the SHA-256 of
each attachment's bytes as it got them, one that takes text only."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from typing import Any

Event = dict[str, Any]


def digest(part: dict[str, Any]) -> str:
    """``kind media_type sha256`` of an inline part, ``kind url`` of one by URL."""
    if "data" in part:
        raw = base64.b64decode(part["data"])
        return f"{part['type']} {part.get('media_type')} {hashlib.sha256(raw).hexdigest()}"
    return f"{part['type']} {part.get('url') or part.get('uri')}"


async def loop(ctx: Any) -> AsyncIterator[Event]:
    lines = [digest(p) for p in ctx.input_parts if p["type"] != "text"]
    earlier = sum(
        1
        for m in ctx.messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] != "text"
    )
    texts = [p["text"] for p in ctx.input_parts if p["type"] == "text"]
    lines.append(f"text: {' '.join(texts) if ctx.input_parts else ctx.input}")
    lines.append(f"earlier attachments: {earlier}")
    yield {"kind": "content_delta", "data": {"delta": "\n".join(lines)}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


loop.accepts = {"image", "audio", "file", "resource"}  # type: ignore[attr-defined]


async def text_loop(ctx: Any) -> AsyncIterator[Event]:
    yield {"kind": "content_delta", "data": {"delta": f"you said: {ctx.input}"}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


async def thread_loop(ctx: Any) -> AsyncIterator[Event]:
    """Answers with the digest of every attachment of the thread's conversation as the loop
    got it: the earlier messages' and the new input's."""
    earlier = [
        digest(p)
        for m in ctx.messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] != "text"
    ]
    lines = earlier + [digest(p) for p in ctx.input_parts if p["type"] != "text"]
    yield {"kind": "content_delta", "data": {"delta": "\n".join(lines) or "none"}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


thread_loop.accepts = {"image", "file"}  # type: ignore[attr-defined]
