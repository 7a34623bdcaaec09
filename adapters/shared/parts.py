"""What a projector knows of its run: the open segment, the tool calls, the token counts.

The projector base (adapters.shared.projector) writes these and its hooks read them. Also here:
the calls a client saw in a stream it already had (:func:`seen_calls`), which a projector that
continues that stream starts from, and the ``ProjectorContext.options`` keys the base reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

import msgspec

from ...contracts.envelope import Envelope

SegmentKind = Literal["content_delta", "reasoning_delta"]
TEXT: SegmentKind = "content_delta"
REASONING: SegmentKind = "reasoning_delta"
TOOL_RESULTS = ("tool_call_result", "tool_error")

# ProjectorContext.options key: the tool calls the client saw before this stream (seen_calls).
SEEN_CALLS = "seenCalls"
# ProjectorContext.options key: the names of the tools the client runs (a request's ``tools``),
# whose calls go to the client; absent where the stream does not know them.
CLIENT_TOOLS = "clientTools"


class Segment(msgspec.Struct, frozen=True, gc=False):
    """An open run of deltas; ``kind`` is the delta kind that continues it."""

    kind: SegmentKind
    id: str  # "<run id>:msg:<seq>" (text) or "<run id>:reasoning:<seq>", seq of its first delta


class Call(msgspec.Struct, frozen=True, gc=False):
    """A tool call this stream knows."""

    id: str
    name: str
    # As sent: any JSON (each protocol maps a foreign value); None when the start was not seen.
    arguments: Any
    seq: int  # the envelope that started or announced it; 0 for a call of an earlier stream


class SeenCall(NamedTuple):
    name: str
    answered: bool


class Usage(msgspec.Struct, gc=False):
    """Token counts of one model over the run; None when the loop never reported that count."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None

    def add(self, data: dict[str, Any]) -> bool:
        """Add an ``llm_response``'s counts; False when it had none. A count is a non-negative
        integer (a bool, a string or a negative number is no count)."""
        added = False
        # Spelled out: this runs once per model response, and a view or a loop costs twice.
        if type(n := data.get("promptTokens")) is int and n >= 0:
            self.input_tokens, added = (self.input_tokens or 0) + n, True
        if type(n := data.get("completionTokens")) is int and n >= 0:
            self.output_tokens, added = (self.output_tokens or 0) + n, True
        if type(n := data.get("totalTokens")) is int and n >= 0:
            self.total_tokens, added = (self.total_tokens or 0) + n, True
        if type(n := data.get("reasoningTokens")) is int and n >= 0:
            self.reasoning_tokens, added = (self.reasoning_tokens or 0) + n, True
        if type(n := data.get("cachedTokens")) is int and n >= 0:
            self.cached_tokens, added = (self.cached_tokens or 0) + n, True
        return added


def seen_calls(envelopes: Iterable[Envelope]) -> dict[str, SeenCall]:
    """The tool calls a client saw in ``envelopes`` (a stream it already had), by the base's
    rules: a start opens a call, a result answers it, an orphan result announced its call. Pass
    as ``ProjectorContext.options[SEEN_CALLS]`` to the projector that continues that stream."""
    seen: dict[str, SeenCall] = {}
    for envelope in envelopes:
        kind = envelope.kind
        if kind != "tool_call_start" and kind not in TOOL_RESULTS:
            continue
        call_id, name = envelope.data.get("id"), envelope.data.get("name")
        if type(call_id) is not str:
            continue
        earlier = seen.get(call_id)
        if kind == "tool_call_start":
            if type(name) is str:
                seen[call_id] = SeenCall(name, answered=False)
        elif earlier is not None:
            seen[call_id] = earlier._replace(answered=True)
        elif type(name) is str:
            seen[call_id] = SeenCall(name, answered=True)
    return seen
