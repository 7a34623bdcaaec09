"""``LoopHooks``: the six extension points of a turn and the actions each may return.

A hook may be a plain or an ``async`` method. Returning ``None`` means "default" and emits
nothing; a hook may also return a list of actions, applied in order. Every action the loop
applies is announced as a ``hook_action`` event. Hooks observe the turn through
:class:`~gateway.reference.types.LoopContext` and never rewrite history: ``Append`` adds to it,
``Rewrite`` and ``Compact`` change what the model is sent, not what the turn has recorded.

A loop may have several hooks objects (``CoreLoop(hooks=[a, b])``); how their actions combine
at each point is :data:`COMPOSITION`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, TypeAlias

import msgspec

from ...contracts.messages import Message, ToolCall
from .types import LoopContext, ModelChunk, ToolResult


class Action(msgspec.Struct, frozen=True, kw_only=True, tag_field="action", tag=str.lower):
    """Base of hook actions; the tag (``proceed``, ``retry`` …) is the event's ``action``."""

    @property
    def name(self) -> str:
        return str(type(self).__struct_config__.tag)


class Proceed(Action, frozen=True):
    pass


class Reject(Action, frozen=True):
    reason: str = ""


class Fail(Action, frozen=True):
    pass


class Retry(Action, frozen=True):
    """``on_request_error``: retry after ``delay_ms``. ``before_completion``: append
    ``message`` as a user nudge and run another round."""

    delay_ms: int = 0
    message: str = ""


class Accept(Action, frozen=True):
    pass


class Narrate(Action, frozen=True):
    text: str = ""


class Continue(Action, frozen=True):
    pass


class Suspend(Action, frozen=True):
    reason: str = ""


class Stop(Action, frozen=True):
    reason: str = ""


class Append(Action, frozen=True):
    """``pre_step``: add ``messages`` (system, user or plain assistant ones) to the history
    before this step's model request; they stay for the rest of the turn."""

    messages: list[Message]
    reason: str = ""


class Rewrite(Action, frozen=True):
    """``pre_step``: send ``messages`` instead of the history in this step's model request
    only (and its retries); messages appended later in the step follow them. The history
    itself is not changed."""

    messages: list[Message]
    reason: str = ""


class Compact(Action, frozen=True):
    """``pre_step``: from this step on, the model is sent ``messages`` (a summary of the turn
    so far, say) followed by whatever the history gains afterwards. The history itself keeps
    every message; only the model's view of it is shortened."""

    messages: list[Message]
    reason: str = ""


class ToolChoice(Action, frozen=True, tag="tool_choice"):
    """``pre_step``: this step's ``tool_choice``: ``"auto"``, ``"none"``, ``"required"``, or
    the name of one offered tool (the model must call it)."""

    choice: str = "required"
    reason: str = ""


class Replace(Action, frozen=True):
    """``post_tool_result``: report ``result`` (to the client and to the model) instead of
    what the tool returned."""

    result: ToolResult
    reason: str = ""


PreStepAction: TypeAlias = Proceed | Reject | Append | Rewrite | Compact | ToolChoice
RequestErrorAction: TypeAlias = Fail | Retry
CompletionAction: TypeAlias = Accept | Retry | Narrate
ToolResultAction: TypeAlias = Continue | Suspend | Replace
ProgressAction: TypeAlias = Proceed | Stop

_Ret: TypeAlias = Any  # an action, None, or an awaitable of either


class RoundSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tool_made_progress`` sees after each tool round."""

    round: int
    tool_names: list[str]
    tool_call_count: int
    failed_count: int
    deduplicated_count: int
    consecutive_tool_errors: int
    text_length: int
    # "repeat" or "oscillation": the turn is stuck and was told so before; without a hook's
    # Proceed it stops as budget_exhausted{kind: "repetition"}.
    stuck: str | None = None


class LoopHooks(Protocol):
    def pre_step(
        self, ctx: LoopContext
    ) -> PreStepAction | Sequence[PreStepAction] | Awaitable[Any] | None: ...

    def post_tool_result(
        self, ctx: LoopContext, call: ToolCall, result: ToolResult
    ) -> ToolResultAction | Sequence[ToolResultAction] | Awaitable[Any] | None: ...

    def on_request_error(
        self, ctx: LoopContext, error: BaseException, attempt: int
    ) -> RequestErrorAction | Sequence[RequestErrorAction] | Awaitable[Any] | None: ...

    def before_completion(
        self, ctx: LoopContext, text: str
    ) -> CompletionAction | Sequence[CompletionAction] | Awaitable[Any] | None: ...

    def on_stream_chunk(self, ctx: LoopContext, chunk: ModelChunk) -> _Ret:
        """Observe-only: the return value is ignored."""
        ...

    def tool_made_progress(
        self, ctx: LoopContext, round_summary: RoundSummary
    ) -> ProgressAction | Sequence[ProgressAction] | Awaitable[Any] | None: ...


class NoHooks:
    """The default: every hook returns ``None``. Subclass it to override only some hooks."""

    def pre_step(self, ctx: LoopContext) -> PreStepAction | None:
        return None

    def post_tool_result(
        self, ctx: LoopContext, call: ToolCall, result: ToolResult
    ) -> ToolResultAction | None:
        return None

    def on_request_error(
        self, ctx: LoopContext, error: BaseException, attempt: int
    ) -> RequestErrorAction | None:
        return None

    def before_completion(self, ctx: LoopContext, text: str) -> CompletionAction | None:
        return None

    def on_stream_chunk(self, ctx: LoopContext, chunk: ModelChunk) -> None:
        return None

    def tool_made_progress(
        self, ctx: LoopContext, round_summary: RoundSummary
    ) -> ProgressAction | None:
        return None


HOOK_NAMES = (
    "pre_step",
    "post_tool_result",
    "on_request_error",
    "before_completion",
    "on_stream_chunk",
    "tool_made_progress",
)

# Which actions each hook may return; anything else is a programming error in the hook.
ALLOWED_ACTIONS: dict[str, tuple[type[Action], ...]] = {
    "pre_step": (Proceed, Reject, Append, Rewrite, Compact, ToolChoice),
    "post_tool_result": (Continue, Suspend, Replace),
    "on_request_error": (Fail, Retry),
    "before_completion": (Accept, Retry, Narrate),
    "on_stream_chunk": (),
    "tool_made_progress": (Proceed, Stop),
}

# How the actions of several hooks (or of one hook's list) combine, point by point.
COMPOSITION: dict[str, str] = {
    "pre_step": "in order, each hook seeing what the ones before it did; the first reject wins "
    "(the hooks after it are not called); the last tool_choice wins",
    "post_tool_result": "in order, each hook seeing the result as replaced by the ones before "
    "it; the first suspend wins",
    "on_request_error": "every hook is asked; the first retry wins, else the first fail",
    "before_completion": "every hook is asked; retry > narrate > accept: the first retry wins, "
    "else every narrate is applied in order, else the answer is accepted",
    "on_stream_chunk": "every hook observes every chunk; return values are ignored",
    "tool_made_progress": "in order; the first stop wins (the hooks after it are not called)",
}

# Redo caps: a hook cannot keep a turn going on its own. A ``before_completion`` retry past
# the cap is not applied (the answer is accepted, said by a hook_action); an
# ``on_request_error`` retry past the cap fails the request.
MAX_COMPLETION_RETRIES = 3  # per turn
MAX_REQUEST_ATTEMPTS = 5  # per model request (a round): the first try and 4 retries
TOOL_CHOICE_MODES = ("auto", "none", "required")
