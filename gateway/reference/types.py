"""The reference loop's ports: model providers, tool executors, hooks, and the event sink."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from ...contracts.loop import LOCAL_LOOP_PRINCIPAL, LoopPrincipal
from ...contracts.messages import Message, ToolCall, ToolSpec
from ...contracts.parts import attachments, describe

# --- model provider -------------------------------------------------------------------------


class TextChunk(msgspec.Struct, frozen=True):
    delta: str


class ReasoningChunk(msgspec.Struct, frozen=True):
    delta: str


class ToolCallChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A fragment of a streamed tool call; fragments with the same ``index`` are one call."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""  # a fragment of the JSON arguments text


class UsageChunk(msgspec.Struct, frozen=True, kw_only=True):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None


class FinishChunk(msgspec.Struct, frozen=True):
    reason: str  # "stop" | "tool_calls" | "length" | …


ModelChunk = TextChunk | ReasoningChunk | ToolCallChunk | UsageChunk | FinishChunk


@runtime_checkable
class ReadsAttachments(Protocol):
    """A model provider that reads some attachments (images, audio, files) itself; one
    without it reads text only."""

    def unread_attachments(self, messages: list[Message]) -> list[str]:
        """The attachments of ``messages`` the model gets only as placeholders, named."""
        ...


def unread_attachments(provider: object, messages: list[Message]) -> list[str]:
    """What of ``messages``' attachments ``provider``'s model only sees named (the reference
    loop says so in ``llm_request.attachmentsAsText``)."""
    if isinstance(provider, ReadsAttachments):
        return provider.unread_attachments(messages)
    return [describe(p) for m in messages if m.role == "user" for p in attachments(m.content)]


class ModelRequest(msgspec.Struct, kw_only=True):
    messages: list[Message]
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    # "auto" | "none" | "required" | the name of one offered tool (see tool_choice_to_wire).
    tool_choice: str | None = None
    # Structured output, as OpenAI's chat completions spell it (LoopConfig.response_format).
    response_format: dict[str, Any] | None = None


def tool_choice_to_wire(choice: str) -> str | dict[str, Any]:
    """``ModelRequest.tool_choice`` as OpenAI-compatible APIs spell it."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class ProviderError(Exception):
    """A model request failed. ``message`` is safe to show to clients (no internals)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after_s: float | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        # How long the server asked to wait before trying again (its Retry-After), if it did.
        self.retry_after_s = retry_after_s


class ModelProvider(Protocol):
    name: str  # provider name for telemetry, e.g. "scripted", "openai"
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream one model response. Raise :class:`ProviderError` on failure."""
        ...


# --- tools ----------------------------------------------------------------------------------


class ToolResult(msgspec.Struct, kw_only=True):
    success: bool
    content: str = ""  # what the model sees as the observation
    error: str | None = None
    data: Any = None  # structured result, sent as ``result`` when persist_tool_results is on
    # A tool may suspend the turn to wait for the user (completion status ``waiting_user``).
    suspend: bool = False


class ToolExecutor(Protocol):
    def specs(self) -> list[ToolSpec]: ...

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult: ...

    def concurrency_safe(self, call: ToolCall) -> bool: ...


PermissionDecision = Literal["allow", "reject"]


class PermissionGate(Protocol):
    """Asks a human before a tool that needs approval runs (ACP request_permission, …)."""

    def needs_approval(self, call: ToolCall) -> bool: ...

    async def decide(self, call: ToolCall) -> PermissionDecision: ...


class LoopContext(msgspec.Struct, kw_only=True):
    """What hooks and tools may read about the turn in progress (never rewrite).

    ``history`` is everything the turn has recorded; ``messages`` what the next model request
    sends: the same list, unless a ``pre_step`` hook compacted or rewrote the model's view.
    ``principal`` is who asked for the run (subject, tenant, scopes; never a credential), for a
    tool or hook that decides by who is asking.
    """

    round: int
    elapsed_ms: float
    history: list[Message]
    consecutive_tool_errors: int = 0
    tokens_used: int = 0
    messages: list[Message] = msgspec.field(default_factory=list)
    principal: LoopPrincipal = LOCAL_LOOP_PRINCIPAL


EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]

# Makes the span of a model request (``"chat"``) or a tool call (``"tool.<call id>"``) current
# while the loop performs it, so spans started inside (an instrumented HTTP client's, a tool's
# own) are its children. The gateway's telemetry provides it; without telemetry it does nothing.
SpanScope = Callable[[str], AbstractContextManager[None]]


def no_scope(key: str) -> AbstractContextManager[None]:
    return nullcontext()
