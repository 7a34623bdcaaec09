"""The scripted model's arithmetic: read whole from the prompt, or said to be unreadable; and the
calculate tool that works it out, safely.

The properties compare with Python itself: an expression drawn at random is written as a person
might (words or symbols, ``1,000`` separators, spaces or none) inside a sentence; the prompt
reader must give back exactly the expression Python would parse, and the calculator must agree
with Python's own evaluation of it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loopgate.contracts.messages import Message
from loopgate.gateway.reference.arithmetic import MAX_NESTING, Arithmetic, find_arithmetic
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tools import MAX_EXPRESSION_CHARS, DemoTools, ToolFailure, calculate
from tests.reference.loop_support import Recorder


@pytest.mark.parametrize(
    ("prompt", "expression"),
    [
        ("What is (3+4)*5?", "(3 + 4) * 5"),
        ("what is -5 + 3", "-5 + 3"),
        ("1,000 + 1", "1000 + 1"),
        ("one tool: what is 17 times 23", "17 * 23"),
        ("What is 1,234,567.25 divided by 2.5?", "1234567.25 / 2.5"),
        ("2 to the power of 10 minus 1", "2 ** 10 - 1"),
        ("compute 2^3^2 please", "2 ** 3 ** 2"),
        ("what's 12 × 3 ÷ 4 − 1", "12 * 3 / 4 - 1"),
        ("17 mod 5 plus 1", "17 % 5 + 1"),
        ("minus 3 times -(2 + 1)", "-3 * -(2 + 1)"),
        ("- -5 + 1", "--5 + 1"),  # a sign of a sign
        ("-2^2", "-2 ** 2"),  # ** binds tighter than the sign on its left
        ("2 ** -1 + 1", "2 ** -1 + 1"),  # and looser than the one on its right
        ("(see 3 + 4)", "3 + 4"),  # the prose's parentheses are not the arithmetic's
        ("what is 3 + 4 - and why?", "3 + 4"),  # a dash before words is punctuation
        ("007 + .5", "7 + 0.5"),
    ],
)
def test_the_whole_expression_is_read(prompt: str, expression: str) -> None:
    assert [found.expression for found in find_arithmetic(prompt)] == [expression]


@pytest.mark.parametrize(
    "prompt",
    [
        "What is the capital of France?",
        "I have 3 apples",  # one number, no operator
        "GPT-4 + 1",  # a name with a number in it is a word
        "run it on 2026-12-02",  # a date is not 2026 - 12 - 2
        "50% of them",
        "the 3x4 grid",
    ],
)
def test_what_is_not_arithmetic_is_left_alone(prompt: str) -> None:
    assert find_arithmetic(prompt) == []


@pytest.mark.parametrize(
    ("prompt", "problem"),
    [
        ("what is 1,2 + 3", "1,2 is not a number I can read"),
        ("what is 20% + 5", "% could be a percentage or a remainder"),
        ("what is 3 4 + 5", "an operator is missing between 3 and 4"),
        ("what is 3 + * 4", "a number is missing before *"),
        ("what is (3 + 4 * 5)) + 1", "a ) has no ( before it"),
        ("what is 2 * (3 + 4", "a ( is never closed"),
        ("what is 3 +", None),  # a lone operator after one number is no arithmetic
        (f"what is {'(' * 30}1{')' * 30} + 2", f"it nests deeper than {MAX_NESTING} levels"),
        (f"what is {' + '.join(['1'] * 60)}", f"longer than {MAX_EXPRESSION_CHARS} characters"),
    ],
)
def test_arithmetic_it_cannot_read_is_said_to_be_unreadable(
    prompt: str, problem: str | None
) -> None:
    found = find_arithmetic(prompt)
    if problem is None:
        assert found == []
        return
    assert len(found) == 1 and found[0].expression is None, found
    assert found[0].problem is not None and problem in found[0].problem


def test_several_expressions_are_found_in_order() -> None:
    found = find_arithmetic("what is 3 + 4 and 5 * 6, and 1,2 + 1?")
    assert found == [
        Arithmetic("3 + 4", "3 + 4"),
        Arithmetic("5 * 6", "5 * 6"),
        Arithmetic("1,2 + 1", problem="1,2 is not a number I can read (1,000 and 2.5 are)"),
    ]


# --- the property: the prompt reader parses as Python does ----------------------------------


@dataclass(frozen=True)
class Drawn:
    python: str  # the expression as the prompt reader must give it back (Python's syntax)
    prose: str  # as a person writes it
    level: int  # 1 sum, 2 product, 3 sign, 4 power, 5 number or parentheses
    numbers: int = 1


SPELLINGS = {
    "+": ["+", "plus"],
    "-": ["-", "minus", "−"],
    "*": ["*", "times", "×", "multiplied by"],
    "/": ["/", "divided by", "÷"],
    "%": ["mod", "modulo"],
}
LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


@st.composite
def numbers(draw: st.DrawFn) -> Drawn:
    whole = draw(st.integers(0, 10_000_000))
    grouped = draw(st.booleans()) and whole >= 1000
    text = f"{whole:,}" if grouped else str(whole)
    if draw(st.booleans()):
        fraction = draw(st.text(alphabet="0123456789", min_size=1, max_size=3))
        return Drawn(f"{whole}.{fraction}", f"{text}.{fraction}", 5)
    return Drawn(str(whole), text, 5)


def _wrapped(item: Drawn, needed: int) -> Drawn:
    if item.level >= needed:
        return item
    return Drawn(f"({item.python})", f"({item.prose})", 5, item.numbers)


def _spaced(spelling: str, spaces: bool) -> str:
    return f" {spelling} " if spaces or spelling[0].isalpha() else spelling


@st.composite
def binary(draw: st.DrawFn, children: st.SearchStrategy[Drawn]) -> Drawn:
    op = draw(st.sampled_from(sorted(SPELLINGS)))
    level = LEVEL[op]
    left = _wrapped(draw(children), level)
    right = _wrapped(draw(children), level + 1)
    spelling = _spaced(draw(st.sampled_from(SPELLINGS[op])), draw(st.booleans()))
    return Drawn(
        f"{left.python} {op} {right.python}",
        f"{left.prose}{spelling}{right.prose}",
        level,
        left.numbers + right.numbers,
    )


@st.composite
def signed(draw: st.DrawFn, children: st.SearchStrategy[Drawn]) -> Drawn:
    operand = _wrapped(draw(children), 3)
    sign, spelling = draw(st.sampled_from([("-", "-"), ("-", "minus "), ("+", "+")]))
    if spelling == "-" and operand.prose.startswith("-"):
        spelling = "- "  # "--5" reads the same, but keep the prose readable
    return Drawn(f"{sign}{operand.python}", f"{spelling}{operand.prose}", 3, operand.numbers)


@st.composite
def power(draw: st.DrawFn, children: st.SearchStrategy[Drawn]) -> Drawn:
    base = draw(children)
    if "**" in base.python:
        base = draw(numbers())  # one power deep, so Python's own answer stays small too
    base = _wrapped(base, 5)
    exponent = draw(st.integers(0, 3))
    spelling = _spaced(draw(st.sampled_from(["**", "^", "to the power of"])), draw(st.booleans()))
    return Drawn(
        f"{base.python} ** {exponent}", f"{base.prose}{spelling}{exponent}", 4, base.numbers + 1
    )


@st.composite
def grouped(draw: st.DrawFn, children: st.SearchStrategy[Drawn]) -> Drawn:
    inner = draw(children)
    return Drawn(f"({inner.python})", f"({inner.prose})", 5, inner.numbers)


expressions = st.recursive(
    numbers(),
    lambda children: st.one_of(
        binary(children), signed(children), power(children), grouped(children)
    ),
    max_leaves=8,
)

# The sentence, and the expression read from it: parentheses around the whole are the
# arithmetic's when they balance.
SENTENCES = {
    "{}": "{}",
    "What is {}?": "{}",
    "one tool: what is {}": "{}",
    "Quick one — {}, thanks.": "{}",
    "({})": "({})",
}


@settings(max_examples=300)
@given(drawn=expressions, sentence=st.sampled_from(sorted(SENTENCES)))
def test_the_prompt_reader_parses_what_a_person_writes_as_python_does(
    drawn: Drawn, sentence: str
) -> None:
    expression = SENTENCES[sentence].format(drawn.python)
    assume(len(expression) <= MAX_EXPRESSION_CHARS and expression.count("(") <= MAX_NESTING)
    found = find_arithmetic(sentence.format(drawn.prose))
    if drawn.numbers < 2:  # "-5", "(7)": one number is no arithmetic
        assert found == []
    else:
        assert [item.expression for item in found] == [expression]


@given(drawn=expressions)
def test_the_calculator_agrees_with_python(drawn: Drawn) -> None:
    assume(len(drawn.python) <= MAX_EXPRESSION_CHARS)
    try:
        expected = eval(drawn.python, {"__builtins__": {}})  # Python itself: the reference
    except ZeroDivisionError:
        with pytest.raises(ToolFailure, match="division by zero"):
            calculate(drawn.python)
        return
    assert calculate(drawn.python) == expected


# --- the calculator stays bounded ----------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "refusal"),
    [
        ("9**9**9", "exponent is larger than 1000"),
        ("(9**9)**999", "result would be too large"),
        ("999999**999", "result would be too large"),
        ("(2**999)**4 * 2**999", "result would be too large"),
        ("1e308 * 10", "result would be too large"),
        ("10**300 / 3**-300", "result would be too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("__import__('os')", "function calls are not allowed"),
        ("1" * (MAX_EXPRESSION_CHARS + 1), "longer than"),
    ],
)
def test_the_calculator_refuses_what_it_cannot_bound(expression: str, refusal: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ToolFailure, match=refusal):
        calculate(expression)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    "prompt", ["(" * 100_000 + "1 + 2", "1 + 2" + ")" * 100_000, "what is " + "( " * 50_000]
)
def test_the_prompt_reader_stays_linear_in_unmatched_parentheses(prompt: str) -> None:
    """One run of 100,000 tokens (the reader once copied and recounted it per parenthesis:
    18 s of the event loop for 20,000)."""
    started = time.perf_counter()
    found = find_arithmetic(prompt)
    assert time.perf_counter() - started < 2.0
    assert [item.expression for item in found] == (["1 + 2"] if "1 + 2" in prompt else [])


@given(st.text(alphabet="9*()-+/.%e ", max_size=MAX_EXPRESSION_CHARS))
def test_any_string_of_arithmetic_symbols_is_answered_or_refused(expression: str) -> None:
    with contextlib.suppress(ToolFailure):  # anything else raised fails the test
        calculate(expression)


# --- the scripted model answers with the tool ----------------------------------------------


async def answer(prompt: str, tmp_path: Path) -> tuple[Recorder, str]:
    loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(tmp_path))
    rec = Recorder()
    history = await loop.run_turn([Message(role="user", content=prompt)], rec)
    return rec, history[-1].content


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        ("What is (3+4)*5?", "(3 + 4) * 5 = 35."),
        ("what is -5 + 3", "-5 + 3 = -2."),
        ("1,000 + 1", "1000 + 1 = 1001."),
        ("one tool: what is 17 times 23", "The result of 17 * 23 is 391."),
        ("what is 3 + 4 and 5 * 6?", "3 + 4 = 7, and 5 * 6 = 30."),
        ("what is 7 / 0?", "the calculator could not work out 7 / 0: division by zero."),
        ("one tool: 9 ** 9 ** 9", "The calculator could not work out 9 ** 9 ** 9: exponent is"),
        (
            "one tool: 2 and 3",
            "There is no arithmetic in your prompt, so I tried the calculator on an example: "
            "2 * 3 + 5 = 11.",
        ),
    ],
)
async def test_the_scripted_model_answers_with_the_calculators_result(
    prompt: str, said: str, tmp_path: Path
) -> None:
    rec, text = await answer(prompt, tmp_path)
    assert said in text
    assert (
        [d["name"] for d in rec.of("tool_call_start")]
        == ["calculate"] * len(rec.of("tool_call_start"))
        != []
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        ("what is 1,2 + 3?", "I cannot work out “1,2 + 3”: 1,2 is not a number I can read"),
        ("one tool: 3 + * 4", "I cannot work out “3 + * 4”: a number is missing before *."),
    ],
)
async def test_the_scripted_model_says_when_it_cannot_read_the_arithmetic(
    prompt: str, said: str, tmp_path: Path
) -> None:
    rec, text = await answer(prompt, tmp_path)
    assert said in text
    assert not rec.of("tool_call_start")  # nothing guessed, nothing calculated
