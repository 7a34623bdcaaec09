"""What loopgate sends an OpenAI chat-completions client, as msgspec Structs.

The shapes of OpenAI's API reference (``chat.completion.chunk``, ``chat.completion``, the error
body, ``model``), and what the official SDKs parse them into. Optional fields default to
``UNSET`` and are left out of the JSON; fields OpenAI always sends (``logprobs``,
``finish_reason`` as ``null``) are always sent. ``loopgate`` is loopgate's extension: the SDKs
keep fields they do not know (``chunk.loopgate`` in Python, ``chunk.loopgate`` in Node) and
every client we know ignores them.

``gc=False``: these hold strings, numbers and JSON payloads, never cycles.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "DONE",
    "PIECE_TAIL",
    "UNSET",
    "ApiError",
    "Carried",
    "Choice",
    "Chunk",
    "Completion",
    "CompletionChoice",
    "Delta",
    "Done",
    "ErrorBody",
    "Event",
    "FunctionDelta",
    "Model",
    "ModelList",
    "Piece",
    "ResponseMessage",
    "StreamError",
    "ToolCallDelta",
    "Usage",
    "WireMessage",
]


class FunctionDelta(msgspec.Struct, gc=False):
    name: str
    arguments: str  # JSON text, whole: the loop hands over a call's arguments at once


class ToolCallDelta(msgspec.Struct, kw_only=True, gc=False):
    index: int  # the call's place among this answer's tool calls
    id: str
    type: str = "function"
    function: FunctionDelta


class Delta(msgspec.Struct, kw_only=True, gc=False):
    role: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    # Where DeepSeek, vLLM and llama.cpp put reasoning; OpenAI-compatible clients read it there.
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallDelta] | UnsetType = UNSET


class Choice(msgspec.Struct, kw_only=True, gc=False):
    index: int
    delta: Delta
    logprobs: None = None
    finish_reason: str | None = None


class Usage(msgspec.Struct, kw_only=True, gc=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    completion_tokens_details: dict[str, int] | UnsetType = UNSET
    prompt_tokens_details: dict[str, int] | UnsetType = UNSET


class Event(msgspec.Struct, gc=False):
    """loopgate's extension on a chunk: the LoopEvent it carries, as the envelope has it."""

    seq: int
    kind: str
    data: Any


class Chunk(
    msgspec.Struct, kw_only=True, gc=False, tag_field="object", tag="chat.completion.chunk"
):
    """One streamed ``chat.completion.chunk``; ``choices`` is empty in the usage chunk only."""

    id: str
    created: int
    model: str
    choices: list[Choice]
    usage: Usage | UnsetType = UNSET
    # loopgate's extension: the LoopEvent this chunk carries.
    loopgate: Event | UnsetType = UNSET


class Piece(msgspec.Struct, gc=False):
    """A delta that continues the open text or reasoning: most of any stream, so it is framed
    from a template. ``head`` is the JSON of its chunk up to the delta's value (the run's
    chunk, made once per run); the chunk is ``head`` + the JSON string of ``text`` +
    :data:`PIECE_TAIL`, the same bytes a :class:`Chunk` with that delta encodes to."""

    head: bytes
    field: str  # "content" or "reasoning_content"
    text: str


PIECE_TAIL = b'},"logprobs":null,"finish_reason":null}]}'


class Carried(msgspec.Struct, gc=False):
    """A chunk with an empty delta that carries an event (every event without an OpenAI home),
    framed from a template as :class:`Piece` is: ``head`` is its chunk's JSON up to the
    ``loopgate`` value, then the JSON of ``event``, then ``}``."""

    head: bytes
    event: Event


class ErrorBody(msgspec.Struct, kw_only=True, gc=False):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class StreamError(msgspec.Struct, kw_only=True, gc=False):
    """A failed run, as a data line of its own: the SDKs raise it as an ``APIError``."""

    error: ErrorBody


class Done(msgspec.Struct, gc=False):
    """The stream's end: ``data: [DONE]``, the one data line that is not JSON."""


DONE = Done()

# A projector's message.
WireMessage = Chunk | Piece | Carried | StreamError | Done


class ResponseMessage(msgspec.Struct, kw_only=True, gc=False):
    role: str
    # None when the answer is tool calls alone (as OpenAI sends it).
    content: str | None
    refusal: None = None
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[dict[str, Any]] | UnsetType = UNSET


class CompletionChoice(msgspec.Struct, kw_only=True, gc=False):
    index: int
    message: ResponseMessage
    logprobs: None = None
    finish_reason: str


class Completion(msgspec.Struct, kw_only=True, gc=False, tag_field="object", tag="chat.completion"):
    """A whole answer (``stream: false``): the chunks of the same run, folded."""

    id: str
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage
    # loopgate's extension: ``{"events": [...]}``, the LoopEvents the chunks carried, in order.
    loopgate: dict[str, Any] | UnsetType = UNSET


class ApiError(msgspec.Struct, kw_only=True, gc=False):
    """An error response body: OpenAI's one shape for every 4xx and 5xx."""

    error: ErrorBody


class Model(msgspec.Struct, kw_only=True, gc=False, tag_field="object", tag="model"):
    id: str
    created: int
    owned_by: str


class ModelList(msgspec.Struct, kw_only=True, gc=False, tag_field="object", tag="list"):
    data: list[Model]
