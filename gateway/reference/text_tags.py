"""Reasoning and tool calls that local models write as text, turned into model chunks.

A model served without a reasoning or tool parser (vLLM, llama.cpp, LM Studio, … with the
parser off) streams its chat template's tags as plain ``content``: Qwen 2.5/3 and Hermes write
``<think>…</think>`` and ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``; DeepSeek-R1
distills and QwQ, whose templates open the think block in the prompt, start their reply inside
it and only close it. :class:`TextTagParser` takes that content delta by delta and gives back
what a server with the parsers on would have sent: :class:`ReasoningChunk` for the thinking,
:class:`ToolCallChunk` for each call (with a fresh id), :class:`TextChunk` for the answer.

It is pure (no I/O) and incremental: a tag split across deltas is held back only while the text
seen so far could still become one, so ``"<"`` followed by anything else is released at once.
Text that uses no tag passes through unchanged.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any, Final, Literal

import msgspec

from ...contracts import json_input
from .types import ModelChunk, ReasoningChunk, TextChunk, ToolCallChunk

__all__ = [
    "TEXT_CALL_INDEX",
    "TEXT_TOOLS_MODES",
    "TextTagParser",
    "TextToolsMode",
    "parse_tool_calls",
]

TextToolsMode = Literal["auto", "on", "off"]
TEXT_TOOLS_MODES: Final = ("auto", "on", "off")

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"
CALL_OPEN: Final = "<tool_call>"
CALL_CLOSE: Final = "</tool_call>"

# Text tool calls are numbered from here so that they never merge with a native call's
# fragments (servers number those from 0) when a reply has both.
TEXT_CALL_INDEX: Final = 1 << 20

# Repair is pure Python (~1 MB/s): past this a body that is not valid JSON is not repaired.
MAX_REPAIR_CHARS: Final = 256 * 1024

_START, _TEXT, _THINK, _IMPLICIT, _CALL = range(5)
_SKIP_WS = 5  # a fast path, not a state: in an answer or a think block, after a tag

# The tags each state looks for; partial ones at the end of a delta are held back.
_START_TAGS: Final = (THINK_OPEN, CALL_OPEN)
_START_TAGS_ON: Final = (THINK_OPEN, CALL_OPEN, THINK_CLOSE)
_CALL_TAIL: Final = len(CALL_CLOSE) - 1

# The proper prefixes of each state's tags: what may be held back.
_PREFIXES: Final[dict[tuple[str, ...], frozenset[str]]] = {
    tags: frozenset(tag[:n] for tag in tags for n in range(1, len(tag)))
    for tags in (_START_TAGS, _START_TAGS_ON)
}

_decoder = msgspec.json.Decoder()


class _Usual(msgspec.Struct):
    name: str | None = None
    arguments: msgspec.Raw = msgspec.Raw(b"")


_usual_decoder = msgspec.json.Decoder(_Usual)
_encode = msgspec.json.encode
_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,256})"')
_FAILED: Final = object()


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


class TextTagParser:
    """One reply's content, delta by delta: :meth:`feed` each one, then :meth:`close`.

    ``mode="auto"``: the tags are recognised where models write them — ``<think>`` at the start
    of the reply (after whitespace only: a model explaining the tag mid-answer is not thinking),
    ``<tool_call>`` anywhere outside a think block. ``mode="on"``: besides, the reply may open
    inside a think block that only ``</think>`` closes (DeepSeek-R1 distills, QwQ); its text
    streams as reasoning, and if the reply ends (not cut off) without closing it, that text was
    the answer after all and is given again as text at the end.

    Whitespace right after ``<think>``, ``</think>`` and ``</tool_call>`` is dropped (templates
    put newlines there), as is whitespace before a tag at the start of the reply.
    """

    __slots__ = (
        "_calls",
        "_fast",
        "_held",
        "_implicit",
        "_new_id",
        "_on",
        "_parts",
        "_skip_ws",
        "_state",
        "_tail",
    )

    def __init__(
        self, mode: TextToolsMode = "auto", new_id: Callable[[], str] = new_call_id
    ) -> None:
        if mode not in ("auto", "on"):
            raise ValueError(f"a text tag parser runs in mode 'auto' or 'on', not {mode!r}")
        self._on = mode == "on"
        self._new_id = new_id
        self._state = _START
        self._held = ""  # text withheld: a partial tag (at the start, with whitespace before it)
        self._skip_ws = False  # drop the whitespace that opens the next text
        self._parts: list[str] = []  # a tool call's body so far
        self._tail = ""  # the body's last characters, where a split closing tag may begin
        self._implicit: list[str] = []  # "on": the reasoning of a think block never opened
        self._calls = 0
        # The state, when a delta can take a fast path (nothing held, no whitespace to drop);
        # -1 otherwise.
        self._fast = -1

    @property
    def tool_calls(self) -> int:
        """How many tool calls the text held so far."""
        return self._calls

    def feed(self, text: str, out: list[ModelChunk]) -> None:
        """Append the chunks ``text`` completes to ``out``."""
        if not text:
            return
        # Fast paths, C-speed searches only: the middle of an answer or a think block whose
        # one tag is not in the delta (a partial one can only start at the last "<"), the
        # middle of a tool call's body.
        # (Written out twice, not shared: a call per delta would cost more than the work.)
        fast = self._fast
        if fast == _TEXT:
            if "<" not in text:
                out.append(TextChunk(text))
                return
            if CALL_OPEN not in text:
                at = text.rfind("<")
                if CALL_OPEN.startswith(text[at:]):
                    self._held = text[at:]
                    self._fast = -1  # the next delta completes the tag or rules it out
                    text = text[:at]
                if text:
                    out.append(TextChunk(text))
                return
        elif fast == _THINK:
            if "<" not in text:
                out.append(ReasoningChunk(text))
                return
            if THINK_CLOSE not in text:
                at = text.rfind("<")
                if THINK_CLOSE.startswith(text[at:]):
                    self._held = text[at:]
                    self._fast = -1
                    text = text[:at]
                if text:
                    out.append(ReasoningChunk(text))
                return
        elif fast == _CALL:
            window = self._tail + text
            if CALL_CLOSE not in window:
                self._parts.append(text)
                self._tail = window[-_CALL_TAIL:]
                return
        elif fast == _SKIP_WS:  # the delta after a tag, whose leading whitespace goes
            text = text.lstrip()
            if text:
                self._skip_ws = False
                self._fast = self._state
                self.feed(text, out)
            return
        self._scan(text, out)
        state = self._state
        if self._held or state not in (_TEXT, _THINK, _CALL):
            self._fast = -1
        else:
            self._fast = _SKIP_WS if self._skip_ws else state

    def close(self, out: list[ModelChunk], *, cut_off: bool = False) -> None:
        """The reply ended (``cut_off``: at the token limit): flush what is held back."""
        state = self._state
        held, self._held = self._held, ""
        if state == _CALL:
            # An unclosed tool call: recovered, unless the cut left JSON that needs repairing
            # (then the call fails with its raw text rather than run on truncated arguments).
            self._emit_calls("".join(self._parts), out, repair=not cut_off)
            self._parts = []
            self._tail = ""
        elif state == _THINK:
            if held:
                out.append(ReasoningChunk(held))
        elif state == _IMPLICIT:
            if held:
                out.append(ReasoningChunk(held))
                self._implicit.append(held)
            if not cut_off:
                out.append(TextChunk("".join(self._implicit)))
            self._implicit = []
        elif held:
            # A partial tag that never completed, or a reply of whitespace: it was text.
            out.append(TextChunk(held))
        self._state = _TEXT
        self._skip_ws = False
        self._fast = _TEXT

    # -- the slow path: tags, partial tags, state changes --------------------------------

    def _scan(self, text: str, out: list[ModelChunk]) -> None:
        s = self._held + text
        self._held = ""
        while s:
            state = self._state
            if state == _CALL:
                s = self._call_body(s, out)
                continue
            if self._skip_ws:
                stripped = s.lstrip()
                if not stripped:
                    return
                s = stripped
                self._skip_ws = False
            if state == _START:
                s = self._start(s, out)
                continue
            # An answer looks for <tool_call>, a think block for </think>: one tag each.
            tag = CALL_OPEN if state == _TEXT else THINK_CLOSE
            at = s.find(tag)
            if at == -1:
                rest = s
                s = ""
                lt = rest.rfind("<")
                if lt != -1 and tag.startswith(rest[lt:]):
                    self._held = rest[lt:]
                    rest = rest[:lt]
            else:
                rest = s[:at]
                s = s[at + len(tag) :]
            if rest:
                if state == _TEXT:
                    out.append(TextChunk(rest))
                else:
                    out.append(ReasoningChunk(rest))
                    if state == _IMPLICIT:
                        self._implicit.append(rest)
            if at == -1:
                return
            if tag == CALL_OPEN:
                self._state = _CALL
            else:
                self._state = _TEXT
                self._skip_ws = True
                self._implicit = []

    def _start(self, s: str, out: list[ModelChunk]) -> str:
        """The reply's first non-whitespace decides: a tag, or text (the answer, or in "on"
        mode the reasoning of a think block the template opened)."""
        body = s.lstrip()
        if not body:
            self._held = s
            return ""
        if body[0] == "<":
            tags = _START_TAGS_ON if self._on else _START_TAGS
            for tag in tags:
                if body.startswith(tag):
                    if tag == CALL_OPEN:
                        self._state = _CALL
                    else:
                        # <think> opens reasoning; a bare </think> closes an empty one.
                        self._state = _THINK if tag == THINK_OPEN else _TEXT
                        self._skip_ws = True
                    return body[len(tag) :]
            if _could_be_tag(body, tags):
                self._held = s
                return ""
        if self._on:
            self._state = _IMPLICIT
            return body
        self._state = _TEXT
        return s

    def _call_body(self, s: str, out: list[ModelChunk]) -> str:
        """Collect a tool call's body; at its closing tag, the call. Returns what follows."""
        window = self._tail + s
        at = window.find(CALL_CLOSE)
        if at == -1:
            self._parts.append(s)
            self._tail = window[-_CALL_TAIL:]
            return ""
        body = "".join(self._parts) + s
        end = len(body) - len(window) + at
        self._parts = []
        self._tail = ""
        self._emit_calls(body[:end], out, repair=True)
        self._state = _TEXT
        self._skip_ws = True
        return body[end + len(CALL_CLOSE) :]

    def _emit_calls(self, body: str, out: list[ModelChunk], *, repair: bool) -> None:
        # A model that forgot a closing tag before its next call: one body, several calls.
        for piece in body.split(CALL_OPEN):
            for name, arguments in parse_tool_calls(piece, repair=repair):
                out.append(
                    ToolCallChunk(
                        index=TEXT_CALL_INDEX + self._calls,
                        id=self._new_id(),
                        name=name,
                        arguments=arguments,
                    )
                )
                self._calls += 1


def _could_be_tag(rest: str, tags: tuple[str, ...]) -> bool:
    """``rest`` (starting at ``<``) is a proper prefix of one of ``tags``."""
    return rest in _PREFIXES[tags]


# --- a tool call's body ---------------------------------------------------------------------


def parse_tool_calls(body: str, *, repair: bool = True) -> list[tuple[str | None, str]]:
    """The ``(name, arguments JSON text)`` of each call in a ``<tool_call>`` body.

    Tolerates chatter around the JSON, raw control characters in its strings, a list of calls,
    ``parameters`` for ``arguments``, arguments sent as a JSON string, and (``repair``) broken
    JSON: unclosed brackets and strings, single quotes, trailing commas. A body beyond repair
    is returned as its raw text (with the name, if one can be read), which the loop reports as
    a failed tool call; an empty body is no call.
    """
    text = body.strip()
    if not text:
        return []
    if len(text) > json_input.DEFAULT_MAX_DEPTH:  # shorter cannot nest that deep
        try:
            json_input.check_depth(text)
        except msgspec.DecodeError:
            return _unparsed(text)
    if text[0] == "{":
        # The usual body, {"name": …, "arguments": {…}}: its arguments' text as it was
        # written, without building and re-encoding them.
        try:
            usual = _usual_decoder.decode(text)
        except msgspec.DecodeError:
            pass
        else:
            arguments = bytes(usual.arguments)
            if usual.name and arguments[:1] == b"{":
                return [(usual.name, arguments.decode())]
    value = _decode(text, repair)
    if value is _FAILED:
        return _unparsed(text)
    items = value if isinstance(value, list) else [value]
    return [_call_of(item, repair) for item in items]


def _unparsed(text: str) -> list[tuple[str | None, str]]:
    """A body that is not JSON: its raw text as the arguments (the loop reports them as
    invalid), and the name if one can be read."""
    found = _NAME.search(text)
    return [(found.group(1) if found else None, text)]


def _call_of(item: Any, repair: bool) -> tuple[str | None, str]:
    if not isinstance(item, dict):
        return None, ""
    function = item.get("function")
    if isinstance(function, dict) and "name" in function:
        item = function  # {"type": "function", "function": {...}}: the API's own shape
    name = item.get("name")
    if not isinstance(name, str) or not name:
        name = None
    arguments = item.get("arguments", item.get("parameters"))
    if arguments is None:
        return name, ""
    if isinstance(arguments, str):
        # Some models send the arguments as JSON text, as the API does.
        decoded = _decode(arguments.strip(), repair) if arguments.strip() else {}
        if isinstance(decoded, dict):
            return name, _encode(decoded).decode()
        return name, arguments
    return name, _encode(arguments).decode()


def _decode(text: str, repair: bool) -> Any:
    """``text`` as JSON, as leniently as allowed; ``_FAILED`` if it is not JSON at all."""
    if len(text) > json_input.DEFAULT_MAX_DEPTH:  # shorter cannot nest that deep
        try:
            json_input.check_depth(text)
        except msgspec.DecodeError:
            return _FAILED
    try:
        return _decoder.decode(text)
    except msgspec.DecodeError:
        pass
    start = _first_bracket(text)
    if start == -1:
        return _FAILED
    end = max(text.rfind("}"), text.rfind("]")) + 1
    candidate = text[start:end] if end > start else text[start:]
    try:
        # The standard library's non-strict mode takes raw newlines and tabs inside strings,
        # which models write in code arguments; nothing else is changed.
        return json.loads(candidate, strict=False)
    except ValueError:
        pass
    if not repair or len(text) - start > MAX_REPAIR_CHARS:
        return _FAILED
    # Imported on first use: it costs ~25 ms at start-up, and most replies never need it.
    import json_repair

    try:
        value = json_repair.loads(text[start:], skip_json_loads=True)
    except Exception:  # RecursionError included: a repair that fails is no call, not a crash
        return _FAILED
    return value if isinstance(value, dict | list) and value else _FAILED


def _first_bracket(text: str) -> int:
    brace, bracket = text.find("{"), text.find("[")
    if brace == -1:
        return bracket
    return brace if bracket == -1 else min(brace, bracket)
