"""``TurnState``: what one turn knows and counts, and how it ends.

Every part of a turn (the round boundary, the model request, the tool round, the answer) reads
and updates one ``TurnState``; the terminal ``completion`` and the salvage of output that was
streamed but never finished live here, so each of them is written once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from ...contracts.messages import Message, ToolCall
from .control import TurnControl
from .stuck import StuckWatch
from .truncation import bounded_messages
from .types import EventSink, LoopContext, ToolResult

if TYPE_CHECKING:
    from .core import CoreLoop


class TurnState:
    """One turn: the loop's parts, the history it extends, its counters and live output."""

    __slots__ = (
        "cfg",
        "client_names",
        "compaction",
        "completion_retries",
        "completion_tokens",
        "consecutive_errors",
        "control",
        "cost_usd",
        "dedup",
        "done",
        "emit",
        "finish_reason",
        "history",
        "live_reasoning",
        "live_text",
        "loop",
        "open_calls",
        "prompt_tokens",
        "rewrite",
        "round",
        "schema_repaired",
        "scope",
        "server_names",
        "started",
        "stuck",
        "text_length",
        "tool_choice",
        "tool_error_count",
        "tool_names",
        "wrap_up",
        "wrap_up_tool_rounds",
    )

    def __init__(
        self, loop: CoreLoop, history: list[Message], emit: EventSink, control: TurnControl
    ) -> None:
        self.loop = loop
        self.cfg = loop.config
        self.history = history
        self.emit = emit
        self.control = control
        self.started = time.perf_counter()
        self.round = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0  # with a price for the model: what its responses cost, in USD
        self.consecutive_errors = 0
        self.tool_error_count = 0
        self.tool_names: list[str] = []
        self.text_length = 0
        self.finish_reason: str | None = None
        self.done = False
        self.dedup: dict[str, ToolResult] = {}
        self.wrap_up = False
        self.wrap_up_tool_rounds = 0
        self.scope = anyio.CancelScope()
        # In-flight output, so a cancel keeps what the user already saw.
        self.live_text: list[str] = []
        self.live_reasoning: list[str] = []
        self.open_calls: dict[str, ToolCall] = {}
        self.client_names = {spec.name for spec in loop.client_tools}
        self.server_names = {spec.name for spec in loop.executor.specs()}
        # What pre_step hooks made of the model's view (never of the history itself): a
        # compaction lasts for the turn, a rewrite and a tool_choice for one step. Each view is
        # its messages plus whatever the history gained after it was made (its mark).
        self.compaction: tuple[list[Message], int] | None = None
        self.rewrite: tuple[list[Message], int] | None = None
        self.tool_choice: str | None = None
        self.completion_retries = 0
        self.schema_repaired = False  # structured output: the one repair round was used
        self.stuck = StuckWatch(loop.config)

    def request_messages(self) -> list[Message]:
        """What the next model request sends: the history, or the view a hook made of it, with
        every tool result bounded by ``max_tool_result_chars``."""
        view = self.rewrite or self.compaction
        if view is None:
            messages = self.history
        else:
            made, mark = view
            messages = [*made, *self.history[mark:]]
        return bounded_messages(messages, self.cfg.max_tool_result_chars)

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)

    def ctx(self) -> LoopContext:
        return LoopContext(
            round=self.round,
            elapsed_ms=self.elapsed_ms(),
            history=self.history,
            messages=self.request_messages(),
            consecutive_tool_errors=self.consecutive_errors,
            tokens_used=self.prompt_tokens + self.completion_tokens,
            principal=self.loop.principal,
        )

    def summary(self, status: str, reason: str) -> dict[str, Any]:
        """A ``completion`` payload: the turn's (or, while executing, the round's) counts."""
        return {
            "status": status,
            "reason": reason,
            "round": self.round,
            "finishReason": self.finish_reason,
            "textLength": self.text_length,
            "toolCalls": list(self.tool_names),
            "toolCallCount": len(self.tool_names),
            "toolErrorCount": self.tool_error_count,
        }

    async def finish(self, status: str, reason: str, **extra: Any) -> None:
        """Emit the turn's terminal ``completion``."""
        self.done = True
        data = self.summary(status, reason)
        data["promptTokens"] = self.prompt_tokens
        data["completionTokens"] = self.completion_tokens
        if self.loop.price is not None:
            data["costUsd"] = round(self.cost_usd, 8)
        data["elapsedMs"] = self.elapsed_ms()
        if data["finishReason"] is None:
            del data["finishReason"]
        data.update(extra)
        await self.emit("completion", data)

    async def finish_round(self) -> None:
        """Emit ``completion{executing}``: a tool round is over, the turn goes on."""
        await self.emit("completion", self.summary("executing", "tool_calls"))

    def salvage(self) -> None:
        """Keep streamed-but-unfinished output in history and close tool calls left open."""
        if self.live_text or self.live_reasoning:
            self.text_length += sum(map(len, self.live_text))
            self.history.append(
                Message(
                    role="assistant",
                    content="".join(self.live_text),
                    reasoning="".join(self.live_reasoning) or None,
                )
            )
            self.live_text.clear()
            self.live_reasoning.clear()
        for call_id, call in self.open_calls.items():
            self.history.append(
                Message(
                    role="tool",
                    tool_call_id=call_id,
                    name=call.name,
                    content="Error: cancelled before the tool finished",
                )
            )
        self.open_calls.clear()
