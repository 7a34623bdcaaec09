"""The body of ``POST /v1/chat/completions`` and what it becomes: a run of the loop.

Validated with msgspec at the edge, so a malformed request is a 400 naming the field before any
run starts. ``response_format`` (``json_object``, ``json_schema``) becomes the run's structured
output. Fields loopgate has no use for (``stop``, ``seed``, ``user``…) are accepted and
ignored, as OpenAI-compatible servers do; every field may be ``null``, as clients that send
every parameter write an unset one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ...contracts import parts
from ...contracts.messages import Message, ToolSpec
from ...contracts.ports import MultitaskStrategy
from ..shared.chat import AssistantToolCall, to_tool_calls

# What OpenAI accepts as a function's name.
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class ImageUrl(msgspec.Struct, kw_only=True):
    url: str
    detail: str | None = None


class InputAudio(msgspec.Struct, kw_only=True):
    data: str
    format: str


class FileRef(msgspec.Struct, kw_only=True):
    file_data: str | None = None  # a data URL or bare base64
    file_id: str | None = None
    filename: str | None = None


class Part(msgspec.Struct, kw_only=True):
    """A content part: ``{"type": "text", "text"}``, ``image_url``, ``input_audio``, ``file``
    or ``refusal``."""

    type: str
    text: str | None = None
    refusal: str | None = None
    image_url: ImageUrl | None = None
    input_audio: InputAudio | None = None
    file: FileRef | None = None


Content = str | list[Part]


class _Message(msgspec.Struct, kw_only=True, tag_field="role"):
    name: str | None = None


class SystemMessage(_Message, tag="system"):
    content: Content


class DeveloperMessage(_Message, tag="developer"):
    content: Content


class UserMessage(_Message, tag="user"):
    content: Content


class AssistantMessage(_Message, tag="assistant"):
    content: Content | None = None
    refusal: str | None = None
    tool_calls: list[AssistantToolCall] | None = None
    # What this adapter streamed as reasoning, sent back by clients that keep it (DeepSeek's).
    reasoning_content: str | None = None


class ToolMessage(_Message, tag="tool"):
    content: Content
    tool_call_id: str


ChatMessage = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage


class FunctionSpec(msgspec.Struct, kw_only=True):
    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(msgspec.Struct, kw_only=True):
    type: Literal["function"]
    function: FunctionSpec


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool | None = None


class LoopgateOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``loopgate``: loopgate's own options on a request (``extra_body`` in the SDKs)."""

    # LoopConfig fields for this run (max_rounds, tool_timeout_ms…), as POST /v1/runs takes.
    config: dict[str, Any] | None = None
    approval: Literal["auto", "always", "never"] | None = None
    thread_id: str | None = None
    # One run per thread at a time (adapters/shared/multitask.py): what to do when it has one.
    multitask_strategy: MultitaskStrategy | None = None
    # Told of the run's end (docs/api.md, "Webhooks"); an allowed host only.
    webhook: str | None = None


class ChatRequest(msgspec.Struct, kw_only=True):
    model: str
    messages: list[ChatMessage]
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    tools: list[ToolDef] | None = None
    tool_choice: Any = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_completion_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    n: int | None = None
    # {"type": "text" | "json_object" | "json_schema", "json_schema": {...}}: checked by the loop.
    response_format: dict[str, Any] | None = None
    loopgate: LoopgateOptions | None = None


class InvalidRequest(ValueError):
    """A request loopgate cannot serve as asked; ``message`` and ``param`` are for the client."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def check(body: ChatRequest) -> None:
    """What the types cannot say. Raises :class:`InvalidRequest`."""
    if not body.messages:
        raise InvalidRequest("messages must hold at least one message", "messages")
    if body.n is not None and body.n != 1:
        raise InvalidRequest("n must be 1: loopgate answers with one choice", "n")
    names = [tool.function.name for tool in body.tools or []]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InvalidRequest(
            f"tools: each function name once ({', '.join(twice)} repeated)", "tools"
        )


def text_of(content: Content | None) -> str:
    """Text parts joined; other parts are named, so that the model knows something was there."""
    return parts.text_of(to_content(content))


_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def to_content(content: Content | None) -> parts.Content:
    """The client's content as the loop's: a string, or parts when it carries attachments."""
    if content is None or isinstance(content, str):
        return content or ""
    out: list[parts.Part] = []
    for index, part in enumerate(content):
        where = f"content[{index}]"
        if part.type == "text" or part.type == "refusal":
            out.append(
                parts.TextPart(text=(part.text if part.type == "text" else part.refusal) or "")
            )
        elif part.type == "image_url" and part.image_url is not None:
            out.append(parts.media("image", url=part.image_url.url))
        elif part.type == "input_audio" and part.input_audio is not None:
            media_type = _AUDIO_TYPES.get(
                part.input_audio.format, f"audio/{part.input_audio.format}"
            )
            out.append(parts.media("audio", media_type=media_type, data=part.input_audio.data))
        elif part.type == "file" and part.file is not None:
            out.append(_file(part.file))
        else:
            raise InvalidRequest(
                f"{where}: a {part.type} part needs its {part.type} field", "messages"
            )
    return parts.content_of(out)


def _file(ref: FileRef) -> parts.MediaPart:
    if ref.file_data is not None:
        inline = parts.from_data_url(ref.file_data)
        media_type, data = inline if inline is not None else (None, ref.file_data)
        return parts.media("file", media_type=media_type, data=data, name=ref.filename)
    if ref.file_id is not None:
        return parts.media("file", url=ref.file_id, name=ref.filename)
    raise InvalidRequest("a file part needs file_data or file_id", "messages")


def to_history(body: ChatRequest) -> list[Message]:
    """The request's messages as the loop's history (the last user message is the new input:
    the hub splits it off, as for every front end)."""
    history: list[Message] = []
    for message in body.messages:
        if isinstance(message, UserMessage):
            history.append(Message(role="user", content=to_content(message.content)))
        elif isinstance(message, SystemMessage | DeveloperMessage):
            history.append(Message(role="system", content=text_of(message.content)))
        elif isinstance(message, AssistantMessage):
            history.append(
                Message(
                    role="assistant",
                    content=text_of(message.content) or message.refusal or "",
                    tool_calls=to_tool_calls(message.tool_calls),
                    reasoning=message.reasoning_content or None,
                )
            )
        else:
            content = text_of(message.content)
            history.append(Message(role="tool", content=content, tool_call_id=message.tool_call_id))
    return history


def client_tools(body: ChatRequest) -> list[ToolSpec]:
    """The request's tools: the client runs them (``tool_choice: "none"`` offers none)."""
    if body.tool_choice == "none":
        return []
    specs = []
    for tool in body.tools or []:
        spec = tool.function
        parameters = spec.parameters or {"type": "object", "properties": {}}
        specs.append(
            ToolSpec(name=spec.name, description=spec.description or "", parameters=parameters)
        )
    return specs


def run_config(body: ChatRequest) -> dict[str, Any]:
    """The run's LoopConfig: ``loopgate.config``, with the request's own sampling fields."""
    config = dict(body.loopgate.config or {}) if body.loopgate is not None else {}
    if body.temperature is not None:
        config["temperature"] = body.temperature
    limit = body.max_completion_tokens or body.max_tokens
    if limit is not None:
        config["max_tokens"] = limit
    response_format = body.response_format
    if response_format is not None and response_format.get("type") != "text":
        config["response_format"] = response_format
    return config


def include_usage(body: ChatRequest) -> bool:
    options = body.stream_options
    return options is not None and options.include_usage is True
