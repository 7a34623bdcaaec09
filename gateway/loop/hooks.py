"""``LoopHooks``: the six extension points of a turn and the actions each may return.

A hook may be a plain or an ``async`` method. Returning ``None`` means "default" and emits
nothing; every action the loop applies is announced as a ``hook_action`` event. Hooks observe
the turn through :class:`~gateway.loop.types.LoopContext` and never rewrite history.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeAlias

import msgspec

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.loop.types import LoopContext, ModelChunk, ToolResult


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


PreStepAction: TypeAlias = Proceed | Reject
RequestErrorAction: TypeAlias = Fail | Retry
CompletionAction: TypeAlias = Accept | Retry | Narrate
ToolResultAction: TypeAlias = Continue | Suspend
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


class LoopHooks(Protocol):
    def pre_step(self, ctx: LoopContext) -> PreStepAction | Awaitable[Any] | None: ...

    def post_tool_result(
        self, ctx: LoopContext, call: ToolCall, result: ToolResult
    ) -> ToolResultAction | Awaitable[Any] | None: ...

    def on_request_error(
        self, ctx: LoopContext, error: BaseException, attempt: int
    ) -> RequestErrorAction | Awaitable[Any] | None: ...

    def before_completion(
        self, ctx: LoopContext, text: str
    ) -> CompletionAction | Awaitable[Any] | None: ...

    def on_stream_chunk(self, ctx: LoopContext, chunk: ModelChunk) -> _Ret:
        """Observe-only: the return value is ignored."""
        ...

    def tool_made_progress(
        self, ctx: LoopContext, round_summary: RoundSummary
    ) -> ProgressAction | Awaitable[Any] | None: ...


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
    "pre_step": (Proceed, Reject),
    "post_tool_result": (Continue, Suspend),
    "on_request_error": (Fail, Retry),
    "before_completion": (Accept, Retry, Narrate),
    "tool_made_progress": (Proceed, Stop),
}
