"""The body ``useChat``'s default transport sends, and what it becomes: a run of the loop.

``DefaultChatTransport`` posts ``{id, messages, trigger, messageId}`` plus whatever the app
adds with its ``body`` option: ``id`` is the chat (the run's thread), ``messages`` the whole
conversation as UI messages (``{id, role, parts}``). Validated with msgspec at the edge, so a
malformed request is a 422 naming the field before any run starts; fields loopgate has no use
for are ignored, as the AI SDK's own servers ignore them.

A UI message is a list of parts; an assistant message's parts are its steps (``step-start``
between them), each step one model response: its text, reasoning and tool calls, the calls'
outputs alongside them (``tool-<name>`` or ``dynamic-tool`` parts). In the loop's history a
step is an assistant message followed by one tool message per call.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ...contracts import parts as parts_
from ...contracts.client_errors import ClientError
from ...contracts.history import NO_RESULT, Conversation, continued
from ...contracts.messages import Message, ToolCall, ToolSpec
from ...contracts.ports import MultitaskStrategy

# What OpenAI-compatible models accept as a function's name (client tools reach the model).
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
DENIED = "Error: the user denied this tool call"
_json = msgspec.json.Encoder()


class Part(msgspec.Struct, kw_only=True, rename="camel"):
    """One part of a UI message, whatever its type: the fields loopgate reads, by name."""

    type: str
    text: str | None = None
    state: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None  # a dynamic-tool part's; a tool-<name> part's is in its type
    input: Any = None
    output: Any = None
    error_text: str | None = None
    media_type: str | None = None
    filename: str | None = None
    url: str | None = None  # a file part's: a data URL, or where the file is
    approval: Any = None
    parts: list[Part] | None = None  # a steering-message's


class UIMessage(msgspec.Struct, kw_only=True):
    role: Literal["system", "user", "assistant"]
    parts: list[Part]
    id: str = ""
    metadata: Any = None


class ClientTool(msgspec.Struct, kw_only=True):
    """A tool the client runs (its ``onToolCall``): offered to the model with the loop's own."""

    name: ToolName
    description: str = ""
    parameters: dict[str, Any] | None = None  # a JSON Schema; none: takes no arguments


class LoopgateOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``loopgate``: loopgate's own options on a request (the transport's ``body`` option)."""

    # LoopConfig fields for this run (max_rounds, tool_timeout_ms…), as POST /v1/runs takes.
    config: dict[str, Any] | None = None
    approval: Literal["auto", "always", "never"] | None = None
    # The run goes on when the client disconnects (by default it is cancelled: stop()).
    detached: bool = False
    # One run per chat at a time (adapters/shared/multitask.py): what to do when it has one.
    multitask_strategy: MultitaskStrategy | None = None
    # Told of the run's end (docs/api.md, "Webhooks"); an allowed host only.
    webhook: str | None = None


class ChatRequest(msgspec.Struct, kw_only=True, rename="camel"):
    messages: list[UIMessage]
    id: str | None = None  # the chat: the run's thread (none: a thread of its own)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = None
    tools: list[ClientTool] | None = None
    # The AI SDK's responseFormat ({"type": "json", "schema"?, "name"?}), sent in the
    # transport's body: the run's structured output.
    response_format: dict[str, Any] | None = None
    loopgate: LoopgateOptions | None = None


def check(body: ChatRequest) -> None:
    """What the types cannot say. Raises :class:`ClientError`."""
    if not body.messages:
        raise ClientError("messages must hold at least one message")
    wanted = body.response_format
    if wanted is not None and wanted.get("type") not in ("text", "json"):
        raise ClientError('responseFormat.type must be "text" or "json"')
    names = [tool.name for tool in body.tools or []]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ClientError(f"tools: each name once ({', '.join(twice)} repeated)")
    for m, message in enumerate(body.messages):
        for p, part in enumerate(message.parts):
            if _tool_name(part) is not None and part.tool_call_id is None:
                raise ClientError(
                    f"messages[{m}].parts[{p}]: a {part.type} part needs a toolCallId"
                )


def response_message_id(body: ChatRequest) -> str | None:
    """The assistant message this run's answer continues (the AI SDK's rule): the last
    message's, when it is the assistant's — a client tool's output sent back, say."""
    last = body.messages[-1] if body.messages else None
    return last.id if last is not None and last.role == "assistant" and last.id else None


def to_history(body: ChatRequest) -> list[Message]:
    """The request's UI messages as the loop's history (the last user message is the new
    input: the hub splits it off, as for every front end). A user message right after an
    answer that asked the user something (``ask_user``) is the question's answer instead:
    the waiting call's result, as every other front end of loopgate makes it."""
    history: list[Message] = []
    waiting: tuple[str, ...] = ()
    for message in body.messages:
        if message.role == "assistant":
            _assistant(message.parts, history)
            waiting = _waiting_on(message)
            continue
        if message.role == "user" and waiting:
            history = continued(Conversation(history, waiting), to_content(message.parts))
        elif message.role == "user":
            history.append(Message(role="user", content=to_content(message.parts)))
        else:
            history.append(Message(role=message.role, content=text_of(message.parts)))
        waiting = ()
    return history


def _waiting_on(message: UIMessage) -> tuple[str, ...]:
    """The tool calls the run of an assistant message ended waiting on an answer for, as its
    metadata says (the ``finish`` chunk's ``loopgate.waiting``)."""
    metadata = message.metadata
    ours = metadata.get("loopgate") if isinstance(metadata, dict) else None
    if not isinstance(ours, dict) or ours.get("status") != "waiting_user":
        return ()
    waiting = ours.get("waiting")
    return tuple(c for c in waiting if isinstance(c, str)) if isinstance(waiting, list) else ()


def text_of(parts: list[Part]) -> str:
    """Text parts joined; files are named, so that the model knows something was there."""
    return parts_.text_of(to_content(parts))


def to_content(parts: list[Part]) -> parts_.Content:
    """A UI message's text and ``file`` parts as the loop's content (a string when it has no
    files); other parts (sources, data, step marks) are the UI's."""
    out: list[parts_.Part] = []
    for part in parts:
        if part.type == "text":
            out.append(parts_.TextPart(text=part.text or ""))
        elif part.type == "file":
            if not part.url:
                raise ClientError("a file part needs its url (a data URL or where the file is)")
            media_type = part.media_type or ""
            kind: Literal["image", "audio", "file"] = (
                "image"
                if media_type.startswith("image/")
                else "audio"
                if media_type.startswith("audio/")
                else "file"
            )
            out.append(
                parts_.media(kind, media_type=part.media_type, url=part.url, name=part.filename)
            )
    return parts_.content_of(out)


class _Step:
    __slots__ = ("calls", "reasoning", "results", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: list[str] = []

    def flush(self, out: list[Message]) -> None:
        text = "".join(self.text)
        if not text and not self.calls:
            return  # reasoning alone is not a message a model can be shown again
        out.append(
            Message(
                role="assistant",
                content=text,
                reasoning="".join(self.reasoning) or None,
                tool_calls=list(self.calls),
            )
        )
        for call, result in zip(self.calls, self.results, strict=True):
            out.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=result))


def _assistant(parts: list[Part], out: list[Message]) -> None:
    step = _Step()
    for part in parts:
        kind = part.type
        if kind == "step-start":
            step.flush(out)
            step = _Step()
        elif kind == "text":
            step.text.append(part.text or "")
        elif kind == "reasoning":
            step.reasoning.append(part.text or "")
        elif kind == "steering-message":
            # Said by the user while the run went, before the step after it.
            step.flush(out)
            step = _Step()
            out.append(Message(role="user", content=text_of(part.parts or [])))
        elif (name := _tool_name(part)) is not None and part.tool_call_id is not None:
            step.calls.append(ToolCall(id=part.tool_call_id, name=name, arguments=_input(part)))
            step.results.append(_result(part))
    step.flush(out)


def _tool_name(part: Part) -> str | None:
    if part.type == "dynamic-tool":
        return part.tool_name or "tool"
    if part.type.startswith("tool-"):
        return part.type[5:]
    return None


def _input(part: Part) -> dict[str, Any]:
    value = part.input
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"_value": value}


def _result(part: Part) -> str:
    """The call's outcome as the tool message says it: the output (its JSON text when it is
    not text), the error, the denial, or that there was none (models reject a call without
    a result)."""
    state = part.state
    if state == "output-available":
        output = part.output
        return output if isinstance(output, str) else _json.encode(output).decode()
    if state == "output-error":
        return f"Error: {part.error_text or 'the tool failed'}"
    if state == "output-denied":
        return DENIED
    return NO_RESULT


def client_tools(body: ChatRequest) -> list[ToolSpec]:
    specs = []
    for tool in body.tools or []:
        parameters = tool.parameters or {"type": "object", "properties": {}}
        specs.append(ToolSpec(name=tool.name, description=tool.description, parameters=parameters))
    return specs


def run_config(body: ChatRequest) -> dict[str, Any]:
    ours = body.loopgate
    config = dict(ours.config or {}) if ours is not None else {}
    wanted = body.response_format
    if wanted is not None and wanted.get("type") == "json":
        schema = wanted.get("schema")
        if schema is None:
            config["response_format"] = {"type": "json_object"}
        else:
            name = wanted.get("name") if isinstance(wanted.get("name"), str) else None
            spec = {"name": name or "response", "schema": schema}
            config["response_format"] = {"type": "json_schema", "json_schema": spec}
    return config
