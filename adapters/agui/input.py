"""RunAgentInput (the AG-UI request body) and its translation into a loop run.

Validated with msgspec at the edge, so a malformed request is a 422 naming the field before
any stream opens. Unknown fields are ignored, as the protocol's own models allow.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from ...contracts import parts
from ...contracts.client_errors import ClientError
from ...contracts.messages import Message, ToolSpec
from ...contracts.ports import MultitaskStrategy
from ..shared.chat import AssistantToolCall, to_tool_calls
from ..shared.chat import parse_arguments as parse_arguments  # its old home
from ..shared.multitask import named_strategy

# A seq: what every 64-bit integer and the SQLite journal hold.
MAX_CURSOR = (1 << 63) - 1
Cursor = Annotated[int, msgspec.Meta(ge=0, le=MAX_CURSOR)]


class _Base(msgspec.Struct, rename="camel", kw_only=True, tag_field="role"):
    id: str | None = None


class Source(msgspec.Struct, kw_only=True):
    """Where a media part's bytes are: ``data`` (base64 ``value``), a ``url``, or a ``file``
    the client's service knows by id."""

    type: Literal["data", "url", "file"]
    value: str
    mime_type: str | None = msgspec.field(default=None, name="mimeType")


class ContentPart(msgspec.Struct, kw_only=True):
    """``text``; ``image``, ``audio``, ``video``, ``document`` with a ``source``; or the pre-1.0
    ``binary`` (``mimeType`` with ``data`` or ``url``)."""

    type: str
    text: str | None = None
    mime_type: str | None = msgspec.field(default=None, name="mimeType")
    source: Source | None = None
    data: str | None = None
    url: str | None = None
    filename: str | None = None


Content = str | list[ContentPart]


class UserMessage(_Base, tag="user"):
    content: Content
    name: str | None = None


class SystemMessage(_Base, tag="system"):
    content: str


class DeveloperMessage(_Base, tag="developer"):
    content: str


class AssistantMessage(_Base, tag="assistant"):
    content: str | None = None
    tool_calls: list[AssistantToolCall] | None = None


class ToolMessage(_Base, tag="tool"):
    content: Content
    tool_call_id: str
    error: str | None = None


class ReasoningMessage(_Base, tag="reasoning"):
    content: str


class ActivityMessage(_Base, tag="activity"):
    activity_type: str | None = None
    content: Any = None


AguiMessage = (
    UserMessage
    | SystemMessage
    | DeveloperMessage
    | AssistantMessage
    | ToolMessage
    | ReasoningMessage
    | ActivityMessage
)


class Tool(msgspec.Struct):
    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class Context(msgspec.Struct):
    description: str
    value: str


class ResumeEntry(msgspec.Struct, rename="camel"):
    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class RunAgentInput(msgspec.Struct, rename="camel", kw_only=True):
    thread_id: str
    run_id: str
    messages: list[AguiMessage]
    protocol_version: str | None = None
    parent_run_id: str | None = None
    state: Any = None
    tools: list[Tool] | None = None
    context: list[Context] | None = None
    forwarded_props: Any = None
    resume: list[ResumeEntry] | None = None


def text_of(content: Content) -> str:
    """Text parts joined; other media are named so the model knows something was attached."""
    return parts.text_of(to_content(content))


# AG-UI's media part types as the loop's part kinds (a video goes as a file).
_KINDS: dict[str, Literal["image", "audio", "file"]] = {
    "image": "image",
    "audio": "audio",
    "video": "file",
    "document": "file",
}


def to_content(content: Content) -> parts.Content:
    """The client's content as the loop's: a string, or parts when it carries media."""
    if isinstance(content, str):
        return content
    out: list[parts.Part] = []
    for index, part in enumerate(content):
        if part.type == "text":
            out.append(parts.TextPart(text=part.text or ""))
        elif part.type == "binary":
            kind: Literal["image", "file"] = (
                "image" if (part.mime_type or "").startswith("image/") else "file"
            )
            if part.data is None and part.url is None:
                raise ClientError(f"content[{index}]: a binary part needs data or url")
            out.append(
                parts.media(
                    kind,
                    media_type=part.mime_type,
                    data=part.data,
                    url=part.url,
                    name=part.filename,
                )
            )
        elif part.type in _KINDS and part.source is not None:
            source = part.source
            inline = source.type == "data"
            out.append(
                parts.media(
                    _KINDS[part.type],
                    media_type=source.mime_type or part.mime_type,
                    data=source.value if inline else None,
                    url=None if inline else source.value,
                )
            )
        else:
            raise ClientError(f"content[{index}]: a {part.type[:40]} part is not one AG-UI defines")
    return parts.content_of(out)


def to_history(body: RunAgentInput) -> list[Message]:
    """AG-UI messages as the loop's history (reasoning and activity messages are UI-only)."""
    history: list[Message] = []
    if body.context:
        lines = "\n".join(f"- {c.description}: {c.value}" for c in body.context)
        history.append(Message(role="system", content=f"Context from the application:\n{lines}"))
    for message in body.messages:
        if isinstance(message, UserMessage):
            history.append(Message(role="user", content=to_content(message.content)))
        elif isinstance(message, SystemMessage | DeveloperMessage):
            history.append(Message(role="system", content=message.content))
        elif isinstance(message, AssistantMessage):
            calls = to_tool_calls(message.tool_calls)
            history.append(
                Message(role="assistant", content=message.content or "", tool_calls=calls)
            )
        elif isinstance(message, ToolMessage):
            content = text_of(message.content)
            if message.error:
                content = f"error: {message.error}" + (f"\n{content}" if content else "")
            history.append(Message(role="tool", content=content, tool_call_id=message.tool_call_id))
    return history


def client_tools(body: RunAgentInput) -> list[ToolSpec]:
    return [
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
        for t in body.tools or []
    ]


def loopgate_props(body: RunAgentInput) -> dict[str, Any]:
    """``forwardedProps.loopgate``: loopgate's own options on an AG-UI request."""
    props = body.forwarded_props
    ours = props.get("loopgate") if isinstance(props, dict) else None
    return ours if isinstance(ours, dict) else {}


def detached(body: RunAgentInput) -> bool:
    """``forwardedProps.loopgate.detached``: the run goes on when the client disconnects."""
    return loopgate_props(body).get("detached") is True


def multitask_strategy(body: RunAgentInput) -> MultitaskStrategy | None:
    """``forwardedProps.loopgate.multitask_strategy``: what the run does when its thread has
    one going (adapters/shared/multitask.py); None: runs on a thread go side by side."""
    strategy = loopgate_props(body).get("multitask_strategy")
    return named_strategy(strategy, "forwardedProps.loopgate.multitask_strategy")


def webhook_url(body: RunAgentInput) -> str | None:
    """``forwardedProps.loopgate.webhook``: told of the run's end (docs/api.md)."""
    url = loopgate_props(body).get("webhook")
    if url is None or isinstance(url, str):
        return url
    raise ClientError("forwardedProps.loopgate.webhook must be a URL string")


def attach_cursor(body: RunAgentInput) -> int | None:
    """``forwardedProps.loopgate.attach``: watch the existing run ``runId`` (after the seq
    ``forwardedProps.loopgate.after``, default 0) instead of starting one; None otherwise."""
    ours = loopgate_props(body)
    if ours.get("attach") is not True:
        return None
    return _count(ours.get("after", 0), "after")


def received_count(body: RunAgentInput) -> int | None:
    """``forwardedProps.loopgate.received``: how many events of this request's stream the
    client already has (a dropped stream asked again); None when the request does not say."""
    ours = loopgate_props(body)
    return _count(ours["received"], "received") if "received" in ours else None


def _count(value: Any, name: str) -> int:
    # ``type(...) is int``: a JSON true is a Python bool, an int subclass, and no count.
    if type(value) is not int or not 0 <= value <= MAX_CURSOR:
        raise ClientError(
            f"forwardedProps.loopgate.{name} must be an integer from 0 to {MAX_CURSOR}"
        )
    return value


class ResumeFrame(msgspec.Struct, rename="camel", kw_only=True):
    """The WebSocket binding's ``{"type": "resume", "runId", "received"}``: the stream of an
    attach to ``runId`` from ``after`` again, without its first ``received`` events."""

    type: Literal["resume"]
    run_id: str
    received: Cursor
    after: Cursor = 0
    thread_id: str = ""  # accepted as an attach's is: the stream names the run's own thread
    # As the dropped stream's request had it: a 1.0 stream differs from a 0.0.x one.
    protocol_version: str | None = None

    def as_input(self) -> RunAgentInput:
        """The attaching RunAgentInput this frame stands for."""
        ours = {"attach": True, "after": self.after, "received": self.received}
        return RunAgentInput(
            thread_id=self.thread_id,
            run_id=self.run_id,
            messages=[],
            protocol_version=self.protocol_version,
            forwarded_props={"loopgate": ours},
        )
