"""The counts a turn's summaries (``stage_complete``, ``completion``) carry."""

from __future__ import annotations

import time
from typing import Any

from ....contracts.envelope import LoopEvent


class Tally:
    """The turn's counts for ``stage_complete`` and ``completion``, kept where events are handed
    out so a summary counts exactly what clients saw, also when a cancel cuts the stream."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.round = 0
        self.finish_reason: str | None = None
        self.text_length = 0
        self.tool_names: list[str] = []
        self.round_calls = 0
        self.tool_errors = 0
        self.consecutive_errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def event(self, kind: str, data: dict[str, Any]) -> LoopEvent:
        if kind == "stage_start":
            self.round = data["round"]
            self.round_calls = 0
        elif kind == "content_delta":
            self.text_length += len(data["delta"])
        elif kind == "llm_response":
            self.finish_reason = data.get("finishReason", self.finish_reason)
            self.prompt_tokens += data.get("promptTokens", 0)
            self.completion_tokens += data.get("completionTokens", 0)
        elif kind == "tool_call_start":
            self.tool_names.append(data["name"])
            self.round_calls += 1
        elif kind in ("tool_call_result", "tool_error"):
            if data.get("success"):
                self.consecutive_errors = 0
            else:
                self.consecutive_errors += 1
                self.tool_errors += 1
        elif kind == "stage_complete":
            data = {
                **data,
                "toolCallCount": self.round_calls,
                "consecutiveToolErrors": self.consecutive_errors,
                "elapsedMs": self._elapsed_ms(),
                "promptTokens": self.prompt_tokens,
                "completionTokens": self.completion_tokens,
            }
        elif kind == "completion":
            data = self._completion(data)
        return LoopEvent(kind, data)

    def _completion(self, data: dict[str, Any]) -> dict[str, Any]:
        summary: dict[str, Any] = {"status": data["status"], "reason": data["reason"]}
        summary["round"] = self.round
        if self.finish_reason is not None:
            summary["finishReason"] = self.finish_reason
        summary["textLength"] = self.text_length
        summary["toolCalls"] = list(self.tool_names)
        summary["toolCallCount"] = len(self.tool_names)
        summary["toolErrorCount"] = self.tool_errors
        if data["status"] != "executing":
            summary["promptTokens"] = self.prompt_tokens
            summary["completionTokens"] = self.completion_tokens
            summary["elapsedMs"] = self._elapsed_ms()
        summary.update(data)
        return summary

    def _elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)
