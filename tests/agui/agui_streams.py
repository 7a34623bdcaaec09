"""Synthetic LoopEvent streams for the AG-UI tests: every rule, not only what recordings contain.

Also the import shim for ``conformance`` (a top-level directory, not an installed package).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import ProjectorContext

ROOT = Path(__file__).resolve().parents[2]

T0 = 1_700_000_000_123_456_789  # ns


class Stream:
    """Builds the envelopes of one run: gapless seq from 1, ts advancing 1.5 ms per event."""

    def __init__(self, run_id: str = "run-1") -> None:
        self.run_id = run_id
        self.envelopes: list[Envelope] = []

    def add(self, kind: str, data: Any = None, /, **fields: Any) -> Stream:
        payload = dict(fields) if data is None else data
        seq = len(self.envelopes) + 1
        self.envelopes.append(Envelope(self.run_id, seq, T0 + seq * 1_500_000, kind, payload))
        return self

    def round(self, n: int, *, text: str = "", reasoning: str = "", model: str = "m-1") -> Stream:
        self.add("llm_request", round=n, attempt=1)
        for piece in _pieces(reasoning):
            self.add("reasoning_delta", delta=piece)
        for piece in _pieces(text):
            self.add("content_delta", delta=piece)
        return self.add(
            "llm_response",
            round=n,
            attempt=1,
            promptTokens=100 * n,
            completionTokens=10 * n,
            totalTokens=110 * n,
            model=model,
        )


def _pieces(text: str) -> list[str]:
    return [text[i : i + 4] for i in range(0, len(text), 4)]


def context(run_id: str = "run-1", version: str | int | None = "1.0") -> ProjectorContext:
    return ProjectorContext(run_id=run_id, thread_id=f"thread-{run_id}", protocol_version=version)


def tool_rounds(final: dict[str, Any]) -> Stream:
    """Two tool rounds then ``completion(**final)``: the reference engine's ordering."""
    s = Stream().add("stage_start", model="m-1")
    s.round(1, reasoning="Let me look that up.", text="Checking the weather.")
    s.add("tool_call_start", id="call-1", name="weather", round=1, arguments={"city": "Oslo"})
    s.add("tool_call_start", id="call-2", name="clock", round=1, arguments={})
    s.add(
        "tool_call_result",
        id="call-1",
        name="weather",
        success=True,
        durationMs=12,
        resultPreview="rain, 7°C",
        result={"sky": "rain", "c": 7},
    )
    s.add("tool_call_result", id="call-2", name="clock", success=False, error="clock offline")
    s.add("stage_complete", round=1, toolCallCount=2, consecutiveToolErrors=1, elapsedMs=40)
    s.add("completion", status="executing", round=1, finishReason="tool_calls")
    s.add("stage_start", model="m-1")
    s.round(2, text="It rains in Oslo.")
    s.add("completion", **final)
    return s


def ingested_without_stages() -> Stream:
    """A pushed stream with no stage_start and interleaved segments (steps open lazily)."""
    s = Stream("ingest-7")
    s.add("content_delta", delta="a")
    s.add("reasoning_delta", delta="b")
    s.add("content_delta", delta="c")
    s.add("tool_call_start", id="t1", name="x", arguments={"q": [1, 2]})
    s.add("tool_error", id="t1", name="x", error="executor raised")
    s.add("completion", status="executing")
    s.add("tool_call_start", id="t2", name="y", arguments={})
    s.add("tool_call_start", id="t3", name="y", arguments={})
    s.add("tool_call_result", id="t2", name="y", success=True, result=[1, 2])
    s.add("tool_call_result", id="t3", name="y", success=True)
    s.add("content_delta", delta="")
    s.add("completion", status="completed")
    return s


def garbage() -> Stream:
    """Unknown kinds, unknown fields and malformed known fields: nothing may raise."""
    s = Stream("junk")
    s.add("stage_start", model="m", engine="native", extra={"x": 1})
    s.add("future_kind", {"anything": [1, None, "z"]})
    s.add("content_delta", delta=5)
    s.add("content_delta", {})
    s.add("reasoning_delta", delta=None)
    s.add("tool_call_start", name="no-id", arguments={})
    s.add("tool_call_start", id="ok", name="f", arguments=[1, 2])
    s.add("tool_call_start", id="s", name="f", arguments='{"pre": "encoded"}')
    s.add("tool_call_result", id=7, name="f", success=True)
    s.add("tool_call_result", id="s", name="f", success=True, resultPreview="fine", novel=True)
    s.add("tool_call_result", id="s", name="f", success=True, resultPreview="again")
    s.add("llm_response", round="one", promptTokens="many", completionTokens=-3, model=5)
    s.add("hook_action", hook="pre_step", action="proceed", round=1)
    s.add("steer", content="focus", round=1)
    s.add("soft_timeout", round=1, elapsedMs=9000, softTimeoutMs=8000)
    s.add("budget_exhausted", kind="tokens", budget=5000)
    s.add("error", message=None)
    s.add("content_delta", delta="still streaming", unknownField={"a": 1})
    s.add("completion", status="completed", reason="done", confidence=0.9, newField=[1])
    return s


def all_streams() -> dict[str, list[Envelope]]:
    """Named streams covering every kind, every terminal status and the degraded paths."""
    streams = {
        "completed": tool_rounds({"status": "completed", "reason": "stop"}),
        # cancelled mid-text: the open message must be closed before RUN_FINISHED
        "cancelled": Stream()
        .add("stage_start")
        .round(1, text="partial ans")
        .add("content_delta", delta="wer")
        .add("completion", status="cancelled", reason="user"),
        "interrupt": Stream()
        .add("stage_start")
        .add("tool_call_start", id="ask-1", name="ask_user", arguments={"q": "Which city?"})
        .add(
            "completion",
            status="waiting_user",
            reason="clarification",
            message="Which city?",
            toolCallId="ask-1",
        ),
        "client_tool": Stream()
        .add("stage_start")
        .round(1, text="Opening the picker.")
        .add("tool_call_start", id="ui-1", name="pick_date", arguments={})
        .add("tool_call_start", id="ui-2", name="pick_time", arguments={})
        .add(
            "completion",
            status="waiting_user",
            reason="client_tool",
            pendingToolCallIds=["ui-1", "ui-2"],
        ),
        "budget": Stream()
        .add("stage_start")
        .round(1, text="thinking")
        .add("budget_exhausted", kind="rounds", rounds=32)
        .add("completion", status="budget_exhausted", reason="max_rounds"),
        "failed": Stream()
        .add("stage_start")
        .round(1, reasoning="hm", text="par")
        .add("error", message="provider stream reset", round=1, phase="llm_stream")
        .add("completion", status="failed", reason="llm_stream_error"),
        "truncated": Stream().add("stage_start").add("content_delta", delta="cut of"),
        "after_terminal": tool_rounds({"status": "completed"}).add(
            "soft_timeout", round=2, elapsedMs=1, softTimeoutMs=1
        ),
        "ingested": ingested_without_stages(),
        "garbage": garbage(),
        "empty": Stream(),
        "unknown_status": Stream().add("completion", status="paused_by_future_engine"),
    }
    return {name: s.envelopes for name, s in streams.items()}


def project(
    envelopes: list[Envelope],
    version: str | int | None = "1.0",
    close_reason: str | None = None,
) -> list[dict[str, Any]]:
    """start + feed all + close, as builtins."""
    from loopgate.adapters.agui import AguiAdapter

    adapter = AguiAdapter()
    run_id = envelopes[0].run_id if envelopes else "run-1"
    p = adapter.projector(context(run_id, version))
    out = list(p.start())
    for env in envelopes:
        out.extend(p.feed(env))
    out.extend(p.close(close_reason))
    return [adapter.to_builtins(m) for m in out]
