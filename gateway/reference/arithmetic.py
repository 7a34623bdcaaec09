"""Arithmetic written in a prompt, found whole and rewritten for the ``calculate`` tool.

The scripted model has no language model, so it must not guess: it reads a prompt's arithmetic
with a small grammar (numbers with ``1,000`` separators and decimals, parentheses, unary signs,
``+ - * / ^ **`` and their symbols ``× ÷ −``, the words ``plus``, ``minus``, ``times``,
``multiplied by``, ``divided by``, ``to the power of``, ``mod``) and either rewrites it in the
calculator's syntax or says why it cannot. Numbers and operators glued to letters (``GPT-4``,
``3x``) and dates (``2026-12-02``) are words, not arithmetic. Nothing here evaluates: the tool
does, with its own bounds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

from .tools import MAX_EXPRESSION_CHARS

MAX_NESTING = 20  # parentheses and signs inside each other
MAX_FOUND = 3  # expressions taken from one prompt

_WORD_OPERATORS = {
    "plus": "+",
    "minus": "-",
    "times": "*",
    "multiplied by": "*",
    "divided by": "/",
    "to the power of": "**",
    "mod": "%",
    "modulo": "%",
}
_SYMBOLS = {"^": "**", "×": "*", "÷": "/", "−": "-"}
_TOKENS = re.compile(
    r"""
    (?P<word_op>\b(?:divided\s+by|multiplied\s+by|to\s+the\s+power\s+of|plus|minus|times
        |modulo|mod)\b)
    | (?P<word>\d{4}-\d\d?-\d\d?\b|\w*[^\W\d_]\w*(?:-\w+)*)
    | (?P<number>\d+(?:,\d+)*(?:\.\d+)?|\.\d+)
    | (?P<op>\*\*|[-+*/^×÷−])
    | (?P<paren>[()])
    | (?P<percent>%)
    | (?P<space>\s+)
    | (?P<other>.)
    """,
    re.VERBOSE | re.IGNORECASE | re.DOTALL,
)
_MATH = frozenset({"word_op", "number", "op", "paren", "percent"})
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_ADDITIVE = frozenset({"+", "-"})
_MULTIPLICATIVE = frozenset({"*", "/", "%"})


class Arithmetic(msgspec.Struct, frozen=True):
    """A prompt's arithmetic: ``written`` as in the prompt; ``expression`` in the calculator's
    syntax, or ``None`` with ``problem`` saying why it could not be read."""

    written: str
    expression: str | None = None
    problem: str | None = None


class _Unreadable(Exception):
    pass


class _Token(msgspec.Struct, frozen=True):
    kind: str  # "number", "op", "paren" or "percent"
    text: str  # as written
    value: str  # as the calculator writes it


def find_arithmetic(prompt: str) -> list[Arithmetic]:
    """Every stretch of the prompt that is arithmetic (two numbers or more and an operator),
    in order, at most ``MAX_FOUND``."""
    found: list[Arithmetic] = []
    for written, tokens in _runs(prompt):
        numbers = sum(token.kind == "number" for token in tokens)
        if numbers < 2 or not any(token.kind in ("op", "percent") for token in tokens):
            continue
        try:
            expression = _Parser(tokens).parse()
        except _Unreadable as problem:
            found.append(Arithmetic(written, problem=str(problem)))
        else:
            found.append(Arithmetic(written, expression=expression))
        if len(found) == MAX_FOUND:
            break
    return found


def _runs(prompt: str) -> Iterator[tuple[str, list[_Token]]]:
    """Maximal stretches of math tokens and blanks, with unmatched parentheses at their edges
    (prose around the arithmetic, "(see 3 + 4)") left out."""
    run: list[tuple[int, int, _Token]] = []
    for match in _TOKENS.finditer(prompt):
        kind = match.lastgroup or "other"
        if kind == "space":
            continue
        if kind in _MATH:
            run.append((match.start(), match.end(), _token(kind, match.group())))
            continue
        if run:
            yield _trimmed(prompt, run)
            run = []
    if run:
        yield _trimmed(prompt, run)


def _token(kind: str, text: str) -> _Token:
    if kind == "word_op":
        return _Token("op", text, _WORD_OPERATORS[" ".join(text.lower().split())])
    if kind == "op":
        return _Token("op", text, _SYMBOLS.get(text, text))
    return _Token(kind, text, text)


def _trimmed(prompt: str, run: list[tuple[int, int, _Token]]) -> tuple[str, list[_Token]]:
    # By index, with the depth counted once: a prompt of 20,000 "(" is one run, and copying
    # and recounting it per parenthesis took 18 s of the event loop.
    depth, first, end = _depth(run), 0, len(run)
    while first < end and run[first][2].text == "(" and depth > 0:
        first, depth = first + 1, depth - 1
    while end > first and run[end - 1][2].text == ")" and depth < 0:
        end, depth = end - 1, depth + 1
    # "3 + 4 - and then": a dash before words is punctuation, not a minus.
    if end > first and run[end - 1][2].text == "-":
        end -= 1
    if end == first:
        return "", []
    return prompt[run[first][0] : run[end - 1][1]], [token for _, _, token in run[first:end]]


def _depth(run: list[tuple[int, int, _Token]]) -> int:
    return sum({"(": 1, ")": -1}.get(token.text, 0) for _, _, token in run)


def _number(text: str) -> str:
    """A number as the calculator writes it: no separators, no leading zeros."""
    if "," in text and not _GROUPED.fullmatch(text):
        raise _Unreadable(f"{text} is not a number I can read (1,000 and 2.5 are)")
    whole, _, fraction = text.replace(",", "").partition(".")
    return str(int(whole or "0")) + (f".{fraction}" if fraction else "")


class _Parser:
    """Recursive descent with Python's precedence: ``**`` (right-associative, binding tighter
    than a sign on its left), then signs, then ``* / %``, then ``+ -``."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.nesting = 0

    def parse(self) -> str:
        expression = self.sum()
        if self.pos < len(self.tokens):
            raise _Unreadable(self._unexpected())
        if len(expression) > MAX_EXPRESSION_CHARS:
            raise _Unreadable(f"it is longer than {MAX_EXPRESSION_CHARS} characters")
        return expression

    def _peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take_op(self, ops: frozenset[str]) -> str | None:
        token = self._peek()
        if token is not None and token.kind == "op" and token.value in ops:
            self.pos += 1
            return token.value
        return None

    def _unexpected(self) -> str:
        token = self.tokens[self.pos]
        if token.kind == "percent":
            return "% could be a percentage or a remainder; write mod for the remainder"
        if token.text == ")":
            return "a ) has no ( before it"
        before = self.tokens[self.pos - 1].text if self.pos else ""
        return f"an operator is missing between {before} and {token.text}"

    def sum(self) -> str:
        left = self.product()
        while (op := self._take_op(_ADDITIVE)) is not None:
            left = f"{left} {op} {self.product()}"
        return left

    def product(self) -> str:
        left = self.signed()
        while (op := self._take_op(_MULTIPLICATIVE)) is not None:
            left = f"{left} {op} {self.signed()}"
        return left

    def signed(self) -> str:
        sign = self._take_op(_ADDITIVE)
        if sign is None:
            return self.power()
        with self._nested():
            return f"{sign}{self.signed()}"

    def power(self) -> str:
        base = self.atom()
        if self._take_op(frozenset({"**"})) is None:
            return base
        with self._nested():
            return f"{base} ** {self.signed()}"

    def atom(self) -> str:
        token = self._peek()
        if token is None:
            after = self.tokens[-1].text
            raise _Unreadable(f"a number is missing after {after}")
        self.pos += 1
        if token.kind == "number":
            return _number(token.text)
        if token.text == "(":
            with self._nested():
                inner = self.sum()
            closing = self._peek()
            if closing is None or closing.text != ")":
                raise _Unreadable("a ( is never closed")
            self.pos += 1
            return f"({inner})"
        self.pos -= 1
        if token.kind == "percent" or token.text == ")":
            raise _Unreadable(self._unexpected())
        raise _Unreadable(f"a number is missing before {token.text}")

    @contextmanager
    def _nested(self) -> Iterator[None]:
        """Counts how deep the parser is, so no prompt can make it recurse without bound."""
        self.nesting += 1
        try:
            if self.nesting > MAX_NESTING:
                raise _Unreadable(f"it nests deeper than {MAX_NESTING} levels")
            yield
        finally:
            self.nesting -= 1
