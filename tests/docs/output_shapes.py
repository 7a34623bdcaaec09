"""The output a doc shows for a command, and whether a command's real output has that shape.

The notes under a command (or a JSON value in its trailing comment) are read as

- **JSON** (``{…}`` / ``[…]``, possibly over several note lines, possibly after ``→ 201``): the
  whole of stdout is one JSON value of that shape;
- **a fragment** (``… "metadata":{…} …``): members the top-level object has;
- **lines** (``id: 1`` / ``event: …`` / ``data: {…}`` / ``#`` for a blank line): stdout's first
  lines, ``…`` standing for any number of lines;
- **text**, two note lines or more of anything else: stdout's lines as they are, the same way
  (what a program prints: ``python chat.py``'s answers, ``mcp_client.py``'s progress);
- **one line of text**, a trailing comment that starts ``→`` (``loopgate --version  # → loopgate
  0.1.0``): the whole of stdout is that line;
- anything else (a trailing comment, one note line) is a remark and is not checked.

A leading HTTP status (``→ 201 {…}``, ``201, Location: …``) is what the server answered; ``curl
-s`` does not print it, so it is not compared. In the shown values ``…`` is "anything": a value,
the other members of an object, more items of a list, or the rest of the word it touches
(``"run_3f26…"`` is any string starting ``run_``). ``<like this>`` is a placeholder for a
value. An object without ``…`` has exactly the keys shown. Strings, booleans and null compare
exactly; a number of ten digits or more is a timestamp and stands for any number; other numbers
compare exactly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ELLIPSIS = "…"
TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)'
    r"|(?P<literal>true|false|null)|(?P<punct>[{}\[\]:,])|(?P<ellipsis>…))"
)
STATUS = re.compile(r"^\d{3}\b[ ,]*")
SSE_LINE = re.compile(r"^(?:id|event|data|retry):")
WILD_WORD = re.compile(r"[0-9A-Za-z]*…|<[^<>\"]+>")


class _AnyValue:
    """``…`` in value position: any value."""

    def __repr__(self) -> str:
        return ELLIPSIS


class _AnyNumber:
    """A timestamp in the shown output: any number."""

    def __repr__(self) -> str:
        return "<a number>"


ANY = _AnyValue()
ANY_NUMBER = _AnyNumber()


@dataclass
class Obj:
    members: list[tuple[str, Any]] = field(default_factory=list)
    open: bool = False


@dataclass
class Arr:
    items: list[Any] = field(default_factory=list)
    open: bool = False


@dataclass
class Num:
    value: float

    def __repr__(self) -> str:
        return f"{self.value:g}"


class ShapeSyntaxError(ValueError):
    """The shown output is not JSON with ellipses."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        match = TOKEN.match(self.text, self.pos)
        if match is None or match.lastgroup is None:
            return None
        return match.lastgroup, match.group(match.lastgroup)

    def take(self) -> tuple[str, str]:
        match = TOKEN.match(self.text, self.pos)
        if match is None or match.lastgroup is None:
            raise ShapeSyntaxError(f"cannot read {self.text[self.pos : self.pos + 20]!r}")
        self.pos = match.end()
        return match.lastgroup, match.group(match.lastgroup)

    def value(self) -> Any:
        kind, token = self.take()
        if kind == "ellipsis":
            return ANY
        if kind == "string":
            return json.loads(token)
        if kind == "number":
            return Num(float(token)) if len(token.lstrip("-").split(".")[0]) < 10 else ANY_NUMBER
        if kind == "literal":
            return {"true": True, "false": False, "null": None}[token]
        if token == "{":
            obj = self.members("}")
            self.expect("}")
            return obj
        if token == "[":
            return self.items()
        raise ShapeSyntaxError(f"unexpected {token!r}")

    def expect(self, punct: str) -> None:
        kind, token = self.take()
        if (kind, token) != ("punct", punct):
            raise ShapeSyntaxError(f"expected {punct!r}, found {token!r}")

    def members(self, closing: str | None) -> Obj:
        obj = Obj()
        while True:
            ahead = self.peek()
            if ahead is None or ahead == ("punct", closing):
                return obj
            kind, token = self.take()
            if kind == "ellipsis":
                obj.open = True
            elif kind == "string":
                self.expect(":")
                obj.members.append((json.loads(token), self.value()))
            elif (kind, token) != ("punct", ","):
                raise ShapeSyntaxError(f"unexpected {token!r} in an object")

    def items(self) -> Arr:
        arr = Arr()
        while True:
            ahead = self.peek()
            if ahead == ("punct", "]"):
                self.take()
                return arr
            if ahead == ("ellipsis", ELLIPSIS):
                self.take()
                arr.open = True
            elif ahead == ("punct", ","):
                self.take()
            else:
                arr.items.append(self.value())

    def rest(self) -> str:
        return self.text[self.pos :]


def parse_shape(text: str) -> Any:
    """A JSON value with ellipses, the whole of ``text``."""
    parser = _Parser(text)
    shape = parser.value()
    if parser.rest().strip():
        raise ShapeSyntaxError(f"more after the value: {parser.rest().strip()[:40]!r}")
    return shape


def leading_shape(text: str) -> Any:
    """A JSON value with ellipses at the start of ``text``; what follows it is ignored."""
    return _Parser(text).value()


def parse_fragment(text: str) -> Obj:
    """``… "key": value …``: members of an object, without its braces."""
    parser = _Parser(text)
    obj = parser.members(None)
    if parser.rest().strip():
        raise ShapeSyntaxError(f"more after the members: {parser.rest().strip()[:40]!r}")
    obj.open = True
    return obj


@dataclass(frozen=True)
class Expected:
    mode: str  # "json", "lines", "text" or "remark"
    shape: Any = None
    lines: tuple[str, ...] = ()


def expected_output(notes: tuple[str, ...], comment: str) -> Expected:
    """What a command's notes (or, without notes, its trailing comment) say it prints."""
    lines = list(notes)
    if lines:
        lines[0] = lines[0].removeprefix("→").lstrip()
        status = STATUS.match(lines[0])
        if status:
            rest = lines[0][status.end() :]
            lines[0:1] = [rest] if rest.startswith(("{", "[")) else []
    text = "\n".join(lines).strip()
    if text.startswith(("{", "[")):
        return Expected("json", parse_shape(text))
    if text.startswith(ELLIPSIS) and '"' in text.split("\n")[0]:
        return Expected("json", parse_fragment(text))
    if lines and SSE_LINE.match(lines[0]):
        return Expected("lines", lines=tuple(lines))
    if len(notes) >= 2:
        return Expected("text", lines=tuple(lines))
    if not notes and '{"' in comment:
        return Expected("json", leading_shape(comment[comment.index('{"') :]))
    if not notes and comment.startswith("→ "):
        return Expected("text", lines=(comment.removeprefix("→ ").strip(),))
    return Expected("remark")


def _pattern(shown: str) -> re.Pattern[str]:
    parts = WILD_WORD.split(shown)
    return re.compile(".*".join(re.escape(part) for part in parts), re.S)


def mismatch(shape: Any, actual: Any, where: str = "$") -> str | None:
    """Why ``actual`` does not have ``shape``; None when it does."""
    if shape is ANY:
        return None
    if isinstance(shape, Obj):
        if not isinstance(actual, dict):
            return f"{where}: an object was shown, got {actual!r:.80}"
        for key, value in shape.members:
            if key not in actual:
                return f"{where}: no key {key!r} (keys: {sorted(actual)})"
            found = mismatch(value, actual[key], f"{where}.{key}")
            if found:
                return found
        shown = {key for key, _ in shape.members}
        if not shape.open and set(actual) != shown:
            return f"{where}: keys {sorted(actual)}, the doc shows {sorted(shown)}"
        return None
    if isinstance(shape, Arr):
        if not isinstance(actual, list):
            return f"{where}: a list was shown, got {actual!r:.80}"
        if not shape.open:
            if len(actual) != len(shape.items):
                return f"{where}: {len(actual)} items, the doc shows {len(shape.items)}"
            for index, (item, got) in enumerate(zip(shape.items, actual, strict=True)):
                found = mismatch(item, got, f"{where}[{index}]")
                if found:
                    return found
            return None
        position = 0
        for item in shape.items:
            while position < len(actual) and mismatch(item, actual[position]):
                position += 1
            if position == len(actual):
                return f"{where}: no item like {item!r:.80}"
            position += 1
        return None
    if isinstance(shape, Num | _AnyNumber):
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            return f"{where}: a number was shown, got {actual!r:.80}"
        if isinstance(shape, _AnyNumber) or actual == shape.value:
            return None
        return f"{where}: {actual!r}, the doc shows {shape!r}"
    if isinstance(shape, str):
        if not isinstance(actual, str):
            return f"{where}: a string was shown, got {actual!r:.80}"
        if _pattern(shape).fullmatch(actual):
            return None
        return f"{where}: {actual!r:.120}, the doc shows {shape!r}"
    if actual is shape:
        return None
    return f"{where}: {actual!r:.80}, the doc shows {shape!r}"


def _text_mismatch(shown: str, actual: str) -> str | None:
    if _pattern(shown).fullmatch(actual):
        return None
    return f"{actual!r:.120}, the doc shows {shown!r:.120}"


def _line_mismatch(shown: str, actual: str) -> str | None:
    field_, sep, value = shown.partition(": ")
    if sep and value.startswith(("{", "[")):
        prefix = f"{field_}: "
        if not actual.startswith(prefix):
            return f"{actual!r:.120}, the doc shows {shown!r:.120}"
        try:
            got = json.loads(actual[len(prefix) :])
        except ValueError:
            return f"{actual!r:.120} is not JSON after {prefix!r}"
        return mismatch(parse_shape(value), got)
    return _text_mismatch(shown, actual)


def output_mismatch(expected: Expected, stdout: str) -> str | None:
    """Why ``stdout`` does not look as the doc shows it; None when it does (or shows nothing)."""
    if expected.mode == "json":
        try:
            actual = json.loads(stdout)
        except ValueError:
            return f"the doc shows JSON; the output is {stdout[:200]!r}"
        return mismatch(expected.shape, actual)
    if expected.mode in ("lines", "text"):
        compare = _line_mismatch if expected.mode == "lines" else _text_mismatch
        actual_lines = stdout.splitlines()
        position = 0
        gap = False
        for shown in expected.lines:
            if shown == ELLIPSIS:
                gap = True
                continue
            while gap and position < len(actual_lines) and compare(shown, actual_lines[position]):
                position += 1
            if position >= len(actual_lines):
                return f"the output ends before a line like {shown!r:.120}"
            found = compare(shown, actual_lines[position])
            if found:
                return f"line {position + 1}: {found}"
            position += 1
            gap = False
        if not gap and position < len(actual_lines):
            return f"more output than the doc shows, from line {position + 1}"
        return None
    return None


def error_answer(stdout: str) -> str | None:
    """An error the server answered (a problem body, a JSON-RPC error) that curl -s exits 0 on."""
    try:
        answer = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    status = answer.get("status")
    if isinstance(status, int) and status >= 400 and "title" in answer:
        return f"the server answered {status}: {answer.get('detail')!r}"
    if "jsonrpc" in answer and "error" in answer:
        return f"the server answered a JSON-RPC error: {answer['error']!r:.200}"
    return None
