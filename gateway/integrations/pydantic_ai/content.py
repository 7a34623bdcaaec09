"""Attachments (contracts/parts.py, as the run context's plain dicts) as pydantic-ai user
content: inline bytes as ``BinaryContent``, URLs as ``ImageUrl`` / ``AudioUrl`` /
``DocumentUrl``, a resource as its text. pydantic-ai's models send each in their provider's own
shape, or say they cannot."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai import AudioUrl, BinaryContent, DocumentUrl, ImageUrl
from pydantic_ai.messages import UserContent

# What a pydantic-ai agent takes: every kind (its model says what it cannot read).
ACCEPTS = frozenset({"image", "audio", "file", "resource"})


def user_content(content: Any) -> str | list[UserContent]:
    """A message's content: its text, or its parts as pydantic-ai user content."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    return [_part(p) for p in content]


def _part(part: Mapping[str, Any]) -> UserContent:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "resource":
        text = part.get("text")
        return (
            f"<resource uri={part.get('uri')!r}>\n{text}\n</resource>"
            if text
            else str(part.get("uri", ""))
        )
    data, url = part.get("data"), part.get("url")
    media_type = part.get("media_type") or "application/octet-stream"
    if isinstance(data, str):
        return BinaryContent(data=base64.b64decode(data), media_type=media_type)
    if kind == "image":
        return ImageUrl(url=str(url))
    if kind == "audio":
        return AudioUrl(url=str(url))
    return DocumentUrl(url=str(url))


def prompt(input_text: str, input_parts: Sequence[Mapping[str, Any]]) -> Any:
    """The run's new user prompt: its parts when it has attachments, else its text (None for
    none, as pydantic-ai takes a turn that continues without a prompt)."""
    if input_parts:
        return user_content(list(input_parts))
    return input_text or None
