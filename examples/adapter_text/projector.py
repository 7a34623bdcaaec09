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

    def on_start(self, out: list[str]) -> None:
        out.append(f"run {self.run_id}\n")

    def open_segment(
        self, out: list[str], segment: Segment, delta: str, envelope: Envelope
    ) -> None:
        out.append("text: " if segment.kind == TEXT else "thinking: ")
        out += self.on_delta(segment, delta, envelope)

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[str]:
        resume, self._resume = self._resume, ""
        return [resume + delta.replace("\n", "\n  ")]

    def close_segment(self, out: list[str], segment: Segment) -> None:
        if not self._resume:  # else a note ended the text's last line already
            out.append("\n")
        self._resume = ""

    def on_tool_start(self, out: list[str], call: Call, envelope: Envelope) -> None:
        args = call.arguments  # any JSON value, or text some loops send already encoded
        self._line(out, f"[tool {call.name}({'' if args is None else _short(args)})]")

    def announce_call(self, out: list[str], call: Call, envelope: Envelope) -> None:
        # An orphan: its arguments were never seen.
        self._line(out, f"[tool {call.name}(?)]")

    def on_tool_result(self, out: list[str], call: Call, envelope: Envelope, failed: bool) -> None:
        data = envelope.data
        if failed:
            value = data.get("error") or data.get("resultPreview") or "failed"
        else:
            value = data.get("resultPreview", data.get("result"))
        self._line(out, f"[{'error' if failed else 'result'} {call.name}: {_short(value)}]")

    def close_call(self, out: list[str], call: Call, status: str) -> None:
        self._line(out, f"[tool {call.name}: no result ({status})]")

    def on_error(self, out: list[str], envelope: Envelope) -> bool:
        message = envelope.data.get("message")
        if not isinstance(message, str):
            return False  # declined: the base sends the event to passthrough
        self._line(out, f"error: {_short(message)}")
        return True

    def on_budget(self, out: list[str], envelope: Envelope) -> bool:
        self._line(out, f"budget exhausted: {self.budget_kind or 'unknown'}")
        return True

    def passthrough(self, out: list[str], envelope: Envelope) -> None:
        # Unknown kinds, kinds without a record of their own, and degraded events.
        if envelope.kind not in QUIET:
            self._line(out, f"· {envelope.kind}")

    def on_terminal(self, out: list[str], status: str, envelope: Envelope) -> None:
        # A tolerant view: a reason or error of a foreign type reads as absent.
        view = view_of(CompletionView, envelope.data)
        how = [status + (f": {view.reason}" if view.reason else "")]
        if status == "failed" and (error := view.error or self.last_error):
            how.append(_short(error))
        tokens_in, tokens_out = self.usage_totals()
        how.append(f"tokens {tokens_in} in, {tokens_out} out")
        out.append(f"[end {'; '.join(how)}]\n")

    def on_truncated(self, out: list[str], reason: str) -> None:
        out.append(f"[end failed: {reason}]\n")

    def _line(self, out: list[str], record: str) -> None:
        # The base closes a segment only for another part of the round (a tool call, the
        # round's end), so a note can come mid-text: it gets a line of its own, and the text
        # goes on indented after it.
        if self.segment is not None and not self._resume:
            out.append("\n")
            self._resume = "  "
        out.append(record + "\n")


def _short(value: object) -> str:
    """One line, at most MAX_SHOWN characters: whatever JSON value a loop sent."""
    text = value if isinstance(value, str) else _json.encode(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
