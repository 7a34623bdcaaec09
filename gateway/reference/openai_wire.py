"""The chat-completions wire format: requests out, stream chunks and errors in.

Decoding ignores unknown fields and tolerates what OpenAI-compatible servers do differently
(reasoning under two names, tool arguments as an object, errors mid-stream). Error text from a
server is cut down to one short printable line and never echoes the API key.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import msgspec

from ...contracts.messages import Message, ToolSpec
from ...contracts.parts import (
    AudioPart,
    Content,
    FilePart,
    ImagePart,
    Part,
    ResourcePart,
    TextPart,
    data_url,
    describe,
    is_textual,
    text_of,
)
from .text_tags import TextTagParser
from .types import (
    ModelChunk,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

MAX_ERROR_MESSAGE_CHARS = 200
RETRYABLE_STATUS = frozenset({408, 429})

# --- wire types (decoding only; unknown fields are ignored) -----------------------------------


class Function(msgspec.Struct):
    name: str | None = None
    # Some servers send a parsed object instead of the JSON text the API specifies.
    arguments: str | dict[str, Any] | None = None


class ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: Function | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class Choice(msgspec.Struct):
    index: int = 0
    delta: Delta | None = None
    finish_reason: str | None = None


class CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    completion_tokens_details: CompletionDetails | None = None


class ErrorBody(msgspec.Struct):
    message: Any = None
    code: Any = None


class Chunk(msgspec.Struct):
    choices: list[Choice] | None = None
    usage: Usage | None = None
    # OpenRouter, vLLM and others report failures mid-stream as ``data: {"error": {...}}``.
    error: ErrorBody | str | None = None


class ErrorResponse(msgspec.Struct):
    error: ErrorBody | str | None = None
    # vLLM's older shape: {"object": "error", "message": "...", "code": 400}
    message: Any = None


chunk_decoder = msgspec.json.Decoder(Chunk)
_error_decoder = msgspec.json.Decoder(ErrorResponse)


# --- conversions ----------------------------------------------------------------------------


def message_to_wire(message: Message, text_only: bool = False) -> dict[str, Any]:
    """``text_only``: the model reads text only, so attachments go as named placeholders."""
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
        wire["content"] = text_of(message.content)
        return wire
    if message.role == "assistant" and message.tool_calls:
        # The API's own shape for a tool-calling turn with no text is ``content: null``.
        wire["content"] = text_of(message.content) or None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": msgspec.json.encode(call.arguments).decode(),
                },
            }
            for call in message.tool_calls
        ]
    elif message.role == "user":
        wire["content"] = content_to_wire(message.content, text_only)
    else:  # system and assistant messages are text in the API
        wire["content"] = text_of(message.content)
    if message.name:
        wire["name"] = message.name
    return wire


# Audio the chat API takes inline (``input_audio.format``), by media type.
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def content_to_wire(content: Content, text_only: bool = False) -> str | list[dict[str, Any]]:
    """A user message's content as chat-completions content: text stays a string; images go
    as ``image_url`` (a data URL, or the client's URL), wav/mp3 as ``input_audio``, PDFs and
    file ids as ``file``, text files inline; what the model cannot take, as a placeholder
    naming it (:func:`unread_parts` lists those)."""
    if isinstance(content, str):
        return content
    return [_part_to_wire(part, text_only) for part in content]


def _part_to_wire(part: Part, text_only: bool) -> dict[str, Any]:
    wire = None if text_only else _media_to_wire(part)
    if wire is not None:
        return wire
    if isinstance(part, FilePart) and part.data is not None and is_textual(part.media_type):
        body = base64.b64decode(part.data).decode("utf-8", errors="replace")
        return {
            "type": "text",
            "text": f"<file name={part.name or 'attachment'!r}>\n{body}\n</file>",
        }
    if isinstance(part, ResourcePart) and part.text is not None:
        return {"type": "text", "text": f"<resource uri={part.uri!r}>\n{part.text}\n</resource>"}
    return {"type": "text", "text": describe(part)}


def _media_to_wire(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    if isinstance(part, AudioPart) and part.data is not None:
        audio_format = _AUDIO_FORMATS.get((part.media_type or "").lower())
        if audio_format is not None:
            return {
                "type": "input_audio",
                "input_audio": {"data": part.data, "format": audio_format},
            }
    if isinstance(part, FilePart):
        if part.data is not None and part.media_type == "application/pdf":
            file = {"file_data": data_url(part), "filename": part.name or "attachment.pdf"}
            return {"type": "file", "file": file}
        if part.data is None and part.url and "://" not in part.url:
            return {"type": "file", "file": {"file_id": part.url}}  # the service's own file
    return None


def unread_parts(messages: list[Message], text_only: bool) -> list[str]:
    """The attachments of user messages that reach the model only as placeholders (named)."""
    unread = []
    for message in messages:
        if message.role != "user" or isinstance(message.content, str):
            continue
        for part in message.content:
            if isinstance(part, TextPart) or (not text_only and _media_to_wire(part) is not None):
                continue
            if isinstance(part, ResourcePart) and part.text is not None:
                continue
            if isinstance(part, FilePart) and part.data is not None and is_textual(part.media_type):
                continue
            unread.append(describe(part))
    return unread


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def delta_chunks(delta: Delta, out: list[ModelChunk], tags: TextTagParser | None = None) -> None:
    """Append the chunks of one stream delta to ``out``; ``tags``: content goes through it."""
    # Servers disagree on the field name; some send both with the same text.
    reasoning = delta.reasoning_content or delta.reasoning
    if reasoning:
        out.append(ReasoningChunk(reasoning))
    if delta.content:
        if tags is None:
            out.append(TextChunk(delta.content))
        else:
            tags.feed(delta.content, out)
    for position, call in enumerate(delta.tool_calls or ()):
        function = call.function or Function()
        arguments = function.arguments
        if isinstance(arguments, dict):
            arguments = msgspec.json.encode(arguments).decode()
        out.append(
            ToolCallChunk(
                # A missing index only happens on servers that send each call whole, in order.
                index=call.index if call.index is not None else position,
                id=call.id,
                name=function.name,
                arguments=arguments or "",
            )
        )


def usage_chunk(usage: Usage) -> UsageChunk:
    details = usage.completion_tokens_details
    return UsageChunk(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        reasoning_tokens=details.reasoning_tokens if details is not None else None,
    )


# --- errors ---------------------------------------------------------------------------------


def stream_error(error: ErrorBody | str, api_key: str | None) -> ProviderError:
    """An error the server reported mid-stream."""
    raw = error.message if isinstance(error, ErrorBody) else error
    code = error.code if isinstance(error, ErrorBody) else None
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    retryable = status is None or status in RETRYABLE_STATUS or status >= 500
    detail = sanitise(raw, api_key)
    message = "model server reported an error mid-stream"
    if detail:
        message += f": {detail}"
    return ProviderError(message, retryable=retryable, status=status)


def error_detail(body: bytes, api_key: str | None) -> str | None:
    """The sanitised message of a JSON error body, if it has one."""
    try:
        parsed = _error_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    raw_message = (
        parsed.error.message
        if isinstance(parsed.error, ErrorBody)
        else parsed.error or parsed.message
    )
    return sanitise(raw_message, api_key)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def sanitise(value: Any, api_key: str | None) -> str | None:
    """A server's error message cut down to one short printable line, never echoing our key."""
    if not isinstance(value, str):
        return None
    text = " ".join(_CONTROL.sub(" ", value).split())
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "[redacted]")
    if len(text) > MAX_ERROR_MESSAGE_CHARS:
        text = text[: MAX_ERROR_MESSAGE_CHARS - 1].rstrip() + "…"
    return text or None
