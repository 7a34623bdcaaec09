"""The chat-completions wire format: requests out, stream chunks and errors in.

Decoding ignores unknown fields and tolerates what OpenAI-compatible servers do differently
(reasoning under two names, tool arguments as an object, errors mid-stream). Error text from a
server is cut down to one short printable line and never echoes the API key.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ...contracts.messages import Message, ToolSpec
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


def message_to_wire(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
        wire["content"] = message.content
        return wire
    if message.role == "assistant" and message.tool_calls:
        # The API's own shape for a tool-calling turn with no text is ``content: null``.
        wire["content"] = message.content or None
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
    else:
        wire["content"] = message.content
    if message.name:
        wire["name"] = message.name
    return wire


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
