"""LoopEvent envelopes -> a plain-text transcript: the hooks of ``RunProjector`` for one client.

One record per line; the text of a segment that spans lines goes on indented by two spaces::

    run one-tool-round
    thinking: Request: “one tool what is 17 times”. One calculation is enough: 17 * 23 + 7.
    [tool calculate({"expression":"17 * 23 + 7"})]
    [result calculate: 398]
    text: The result of 17 * 23 + 7 is 398.
    [end completed: stop; tokens 33 in, 36 out]
"""

from __future__ import annotations

import msgspec

from loopgate.adapters.shared.projector import TEXT, Call, RunProjector, Segment
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.events import CompletionView, view_of
from loopgate.contracts.projector import ProjectorContext

# The run's bookkeeping, shown at the end instead; the terminal completion has its own line.
QUIET = frozenset({"stage_start", "llm_request", "llm_response", "stage_complete", "completion"})
# A result can be megabytes: a transcript shows its start.
MAX_SHOWN = 120
_json = msgspec.json.Encoder()


class TextProjector(RunProjector[str]):
    """Each message is a piece of the transcript; the rendering joins them as they are."""

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        self._resume = ""  # "  " after a note broke the open segment's line

    def on_start(self) -> list[str]:
        return [f"run {self.run_id}\n"]

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[str]:
        opening = "text: " if segment.kind == TEXT else "thinking: "
        return [opening, *self.on_delta(segment, delta, envelope)]

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[str]:
        resume, self._resume = self._resume, ""
        return [resume + delta.replace("\n", "\n  ")]

    def close_segment(self, segment: Segment) -> list[str]:
        ended = bool(self._resume)  # a note ended the text's last line already
        self._resume = ""
        return [] if ended else ["\n"]

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[str]:
        args = call.arguments  # any JSON value, or text some loops send already encoded
        return self._line(f"[tool {call.name}({'' if args is None else _short(args)})]")

    def announce_call(self, call: Call, envelope: Envelope) -> list[str]:
        # An orphan: its arguments were never seen.
        return self._line(f"[tool {call.name}(?)]")

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[str]:
        data = envelope.data
        if failed:
            value = data.get("error") or data.get("resultPreview") or "failed"
        else:
            value = data.get("resultPreview", data.get("result"))
        return self._line(f"[{'error' if failed else 'result'} {call.name}: {_short(value)}]")

    def close_call(self, call: Call, status: str) -> list[str]:
        return self._line(f"[tool {call.name}: no result ({status})]")

    def on_error(self, envelope: Envelope) -> list[str]:
        message = envelope.data.get("message")
        if not isinstance(message, str):
            return self.passthrough(envelope)  # no words of its own: shown as any event
        return self._line(f"error: {_short(message)}")

    def on_budget(self, envelope: Envelope) -> list[str]:
        return self._line(f"budget exhausted: {self.budget_kind or 'unknown'}")

    def passthrough(self, envelope: Envelope) -> list[str]:
        # Unknown kinds, kinds without a record of their own, and degraded events.
        return [] if envelope.kind in QUIET else self._line(f"· {envelope.kind}")

    def on_terminal(self, status: str, envelope: Envelope) -> list[str]:
        # A tolerant view: a reason or error of a foreign type reads as absent.
        view = view_of(CompletionView, envelope.data)
        how = [status + (f": {view.reason}" if view.reason else "")]
        if status == "failed" and (error := view.error or self.last_error):
            how.append(_short(error))
        tokens_in, tokens_out = self.usage_totals()
        how.append(f"tokens {tokens_in} in, {tokens_out} out")
        return [f"[end {'; '.join(how)}]\n"]

    def on_truncated(self, reason: str) -> list[str]:
        return [f"[end failed: {reason}]\n"]

    def _line(self, record: str) -> list[str]:
        # The base closes a segment only for another part of the round (a tool call, the
        # round's end), so a note can come mid-text: it gets a line of its own, and the text
        # goes on indented after it.
        if self.segment is not None and not self._resume:
            self._resume = "  "
            return ["\n", record + "\n"]
        return [record + "\n"]


def _short(value: object) -> str:
    """One line, at most MAX_SHOWN characters: whatever JSON value a loop sent."""
    text = value if isinstance(value, str) else _json.encode(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
