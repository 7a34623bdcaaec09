"""The text tag parser on its own: ``<think>`` / ``<tool_call>`` written by local models become
reasoning and tool calls, whatever the chunking of the stream.

The properties: one text split at every boundary, or into random pieces, gives the same chunks
(adjacent text or reasoning merged: a split delta is two deltas); text without tags passes
through unchanged, with only a possible partial tag held back and released at the first
character that rules it out.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopgate.gateway.reference.text_tags import (
    CALL_OPEN,
    TEXT_CALL_INDEX,
    TextTagParser,
    TextToolsMode,
    parse_tool_calls,
)
from loopgate.gateway.reference.types import ModelChunk, ReasoningChunk, TextChunk, ToolCallChunk
from tests.fakes.openai_server import TRANSCRIPTS

Normal = list[tuple[str, object]]


def ids() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def parse(
    parts: Sequence[str], mode: TextToolsMode = "auto", *, cut_off: bool = False
) -> list[ModelChunk]:
    parser = TextTagParser(mode, new_id=ids())
    out: list[ModelChunk] = []
    for part in parts:
        parser.feed(part, out)
    parser.close(out, cut_off=cut_off)
    return out


def normal(chunks: list[ModelChunk]) -> Normal:
    """Adjacent text (or reasoning) merged; empty deltas are a bug, so they are kept."""
    merged: Normal = []
    for chunk in chunks:
        if isinstance(chunk, ToolCallChunk):
            merged.append(("call", (chunk.index, chunk.id, chunk.name, chunk.arguments)))
            continue
        kind = "text" if isinstance(chunk, TextChunk) else "reasoning"
        assert isinstance(chunk, TextChunk | ReasoningChunk)
        if not chunk.delta:
            merged.append((kind, "<empty delta>"))
        elif merged and merged[-1][0] == kind:
            merged[-1] = (kind, str(merged[-1][1]) + chunk.delta)
        else:
            merged.append((kind, chunk.delta))
    return merged


def calls(chunks: list[ModelChunk]) -> list[tuple[str | None, dict[str, object]]]:
    return [
        (c.name, json.loads(c.arguments) if c.arguments else {})
        for c in chunks
        if isinstance(c, ToolCallChunk)
    ]


# --- what each tag becomes --------------------------------------------------------------------


def test_think_then_answer() -> None:
    out = normal(parse(["<think>\nLet me think.\n</think>\n\nThe answer is 4."]))
    assert out == [("reasoning", "Let me think.\n"), ("text", "The answer is 4.")]


def test_an_empty_think_emits_nothing() -> None:
    assert parse(["<think></think>"]) == []
    assert normal(parse(["<think>\n\n</think>\n\nHi"])) == [("text", "Hi")]


def test_an_unclosed_think_is_reasoning_and_not_the_answer() -> None:
    assert normal(parse(["<think>\nStill thinking about </thi"])) == [
        ("reasoning", "Still thinking about </thi")
    ]


def test_a_tool_call_gets_a_fresh_id_and_its_arguments() -> None:
    out = parse(
        ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>']
    )
    assert out == [
        ToolCallChunk(
            index=TEXT_CALL_INDEX, id="call_0", name="get_weather", arguments='{"city": "Paris"}'
        )
    ]
    real = TextTagParser()
    got: list[ModelChunk] = []
    real.feed('<tool_call>{"name": "f"}</tool_call><tool_call>{"name": "f"}</tool_call>', got)
    first, second = (c for c in got if isinstance(c, ToolCallChunk))
    assert first.id and second.id and first.id != second.id and first.id.startswith("call_")
    assert (first.index, second.index) == (TEXT_CALL_INDEX, TEXT_CALL_INDEX + 1)


def test_text_around_tool_calls() -> None:
    out = normal(
        parse(
            [
                "I'll check.\n<tool_call>\n"
                '{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n'
                '{"arguments": {"x": 1}, "name": "b"}\n</tool_call>\n'
            ]
        )
    )
    assert out == [
        ("text", "I'll check.\n"),
        ("call", (TEXT_CALL_INDEX, "call_0", "a", "{}")),
        ("call", (TEXT_CALL_INDEX + 1, "call_1", "b", '{"x": 1}')),
    ]


def test_think_is_only_recognised_at_the_start_of_the_reply() -> None:
    # A model explaining the tag mid-answer is not thinking.
    assert normal(parse(["Use <think> to reason."])) == [("text", "Use <think> to reason.")]
    assert normal(parse(["  \n<think>x</think>y"])) == [("reasoning", "x"), ("text", "y")]


def test_tags_inside_think_are_reasoning() -> None:
    out = normal(parse(["<think>I could write <tool_call> here</think>Done"]))
    assert out == [("reasoning", "I could write <tool_call> here"), ("text", "Done")]


def test_an_unclosed_tool_call_is_recovered() -> None:
    out = parse(['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n'])
    assert calls(out) == [("get_weather", {"city": "Paris"})]


def test_an_unclosed_tool_call_cut_off_by_the_token_limit_is_not_repaired() -> None:
    body = '<tool_call>\n{"name": "write_note", "arguments": {"text": "Dear team, the'
    [call] = parse([body], cut_off=True)
    assert isinstance(call, ToolCallChunk) and call.name == "write_note"
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.arguments)  # raw text: the loop reports invalid arguments
    # Complete JSON with only the closing tag cut off still runs.
    whole = parse(['<tool_call>{"name": "f", "arguments": {"a": 1}}'], cut_off=True)
    assert calls(whole) == [("f", {"a": 1})]


def test_an_empty_tool_call_is_no_call() -> None:
    assert parse(["<tool_call>\n</tool_call>"]) == []
    assert parse(["<tool_call>"]) == []


def test_a_lone_close_think_in_auto_mode_is_text() -> None:
    assert normal(parse(["a</think>b"])) == [("text", "a</think>b")]


def test_on_mode_reply_opening_inside_a_think_block() -> None:
    out = normal(parse(["Okay, 2 + 2 = 4.\n</think>\n\nThe answer is 4."], "on"))
    assert out == [("reasoning", "Okay, 2 + 2 = 4.\n"), ("text", "The answer is 4.")]
    # A reply that starts with its own tag is read as in auto mode.
    assert normal(parse(["<think>a</think>b"], "on")) == [("reasoning", "a"), ("text", "b")]
    assert calls(parse(['<tool_call>{"name": "f"}</tool_call>'], "on")) == [("f", {})]


def test_on_mode_reply_that_never_closes_the_think_block_was_the_answer() -> None:
    assert normal(parse(["Hello there."], "on")) == [
        ("reasoning", "Hello there."),
        ("text", "Hello there."),
    ]
    # Cut off at the token limit, it was thinking.
    assert normal(parse(["Hmm, let me", " see"], "on", cut_off=True)) == [
        ("reasoning", "Hmm, let me see")
    ]


def test_the_parser_refuses_mode_off() -> None:
    with pytest.raises(ValueError, match="auto"):
        TextTagParser("off")


# --- holding back partial tags ----------------------------------------------------------------


def test_a_lt_that_is_not_a_tag_is_released_at_the_next_character() -> None:
    parser = TextTagParser()
    out: list[ModelChunk] = []
    parser.feed("Hi", out)
    parser.feed(" a<", out)
    assert normal(out) == [("text", "Hi a")]
    parser.feed("b", out)
    assert normal(out) == [("text", "Hi a<b")]
    parser.feed(" <tool_c", out)
    assert normal(out) == [("text", "Hi a<b ")]
    parser.feed("x", out)
    assert normal(out) == [("text", "Hi a<b <tool_cx")]


def test_a_partial_tag_at_the_end_is_text() -> None:
    assert normal(parse(["The end <tool_ca"])) == [("text", "The end <tool_ca")]


def test_a_tag_split_character_by_character() -> None:
    text = '<think>hm</think>ok<tool_call>{"name": "f", "arguments": {"a": "<"}}</tool_call>'
    assert normal(parse(list(text))) == normal(parse([text]))
    assert calls(parse(list(text))) == [("f", {"a": "<"})]


# --- the body of a tool call ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # The usual shape: the arguments as written; the others re-encoded.
        ('{"name": "f", "arguments": {"a": 1}}', [("f", '{"a": 1}')]),
        ('Sure! {"name": "f", "arguments": {"a": 1}} Done.', [("f", '{"a":1}')]),
        ('{"name": "f", "parameters": {"a": 1}}', [("f", '{"a":1}')]),
        ('{"name": "f", "arguments": "{\\"a\\": 1}"}', [("f", '{"a":1}')]),
        ('{"type": "function", "function": {"name": "f", "arguments": {}}}', [("f", "{}")]),
        ('[{"name": "f", "arguments": {}}, {"name": "g"}]', [("f", "{}"), ("g", "")]),
        ('{"name": "f", "arguments": {"code": "a\nb"}}', [("f", '{"code":"a\\nb"}')]),
        ("{'name': 'f', 'arguments': {'a': True,}}", [("f", '{"a":true}')]),
        ('{"name": "f", "arguments": {"a": [1, 2', [("f", '{"a":[1,2]}')]),
        ('{"name": "f", "arguments": {"a": 1}', [("f", '{"a":1}')]),
        ('get_weather(city="Paris")', [(None, 'get_weather(city="Paris")')]),
        ('{"name": "f", "arguments": {"a": 1 +}', [("f", '{"a":1}')]),
        ('"just text"', [(None, "")]),
        ("", []),
    ],
)
def test_tool_call_bodies(body: str, expected: list[tuple[str | None, str]]) -> None:
    assert parse_tool_calls(body) == expected


def test_a_body_beyond_repair_keeps_its_name_and_raw_text() -> None:
    body = '{"name": "get_weather", "arguments": <<city=Paris>>}'
    [(name, raw)] = parse_tool_calls(body, repair=False)
    assert name == "get_weather" and raw == body


def test_deeply_nested_bodies_are_refused_not_recursed() -> None:
    body = '{"name": "f", "arguments": ' + "[" * 5000
    [(name, raw)] = parse_tool_calls(body)
    assert name == "f" and raw == body


# --- properties: chunk boundaries do not matter -----------------------------------------------

MIXED = (
    "<think>\nThe user wants <b>bold</b> weather; a < b and c<d.\n</think>\n\n"
    "Checking.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "note": "</tool_c"}}\n'
    "</tool_call>\n<tool_call>\n"
    "{'name': 'clock', 'arguments': {'tz': 'UTC',}}\n</tool_call>\n"
    "Then <tool_ca and < tool_call> stay text.<tool_call>\n"
    '{"name": "last", "arguments": {"a": [1'
)

SAMPLES = {
    "mixed": MIXED,
    **{f"{name}/{i}": t.text(i) for name, t in TRANSCRIPTS.items() for i in range(len(t.replies))},
}


@pytest.mark.parametrize("mode", ["auto", "on"])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_single_split_gives_the_same_chunks(name: str, mode: TextToolsMode) -> None:
    text = SAMPLES[name]
    whole = normal(parse([text], mode))
    for at in range(len(text) + 1):
        assert normal(parse([text[:at], text[at:]], mode)) == whole, at


def test_the_mixed_sample_has_everything() -> None:
    out = normal(parse([MIXED]))
    assert [kind for kind, _ in out] == ["reasoning", "text", "call", "call", "text", "call"]
    assert out[4] == ("text", "Then <tool_ca and < tool_call> stay text.")
    assert calls(parse([MIXED])) == [
        ("get_weather", {"city": "Paris", "note": "</tool_c"}),
        ("clock", {"tz": "UTC"}),
        ("last", {"a": [1]}),
    ]


ATOMS = [
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<", ">", "/", "<t", "</", "think",
    "tool_call", "<tool_", " ", "\n", "a", "Hi", '{"name": "f", "arguments": {"a": 1}}',
    '{"name": "g"', "}", "{", '"', "'",
]  # fmt: skip


@st.composite
def split_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = "".join(draw(st.lists(st.sampled_from(ATOMS), max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(split_text(), st.sampled_from(["auto", "on"]))
def test_random_splits_give_the_same_chunks(
    sample: tuple[str, list[str]], mode: TextToolsMode
) -> None:
    text, parts = sample
    assert normal(parse(parts, mode)) == normal(parse([text], mode))


@given(split_text())
def test_no_tool_call_tag_leaks_into_the_answer(sample: tuple[str, list[str]]) -> None:
    for kind, value in normal(parse(sample[1])):
        if kind == "text":
            assert CALL_OPEN not in str(value)


@given(st.text(alphabet=st.sampled_from("ab <>/_\ntoolcalhink"), max_size=60), st.data())
def test_text_without_tags_passes_through_held_back_only_while_it_could_be_one(
    text: str, data: st.DataObject
) -> None:
    """Without a tag (and past the reply's first character), what is released after each
    delta is everything but the shortest tail that could still become ``<tool_call>``."""
    text = "x" + text
    if CALL_OPEN in text or text.lstrip().startswith(("<think>", "<tool_call>")):
        return
    cuts = sorted(data.draw(st.lists(st.integers(1, len(text)), max_size=10)))
    parser = TextTagParser()
    out: list[ModelChunk] = []
    fed = ""
    for a, b in itertools.pairwise([0, *cuts, len(text)]):
        parser.feed(text[a:b], out)
        fed += text[a:b]
        released = "".join(c.delta for c in out if isinstance(c, TextChunk))
        held = fed[len(released) :]
        assert fed.startswith(released)
        assert held == "" or (held.startswith("<") and CALL_OPEN.startswith(held))
        assert held == "" or "<" not in held[1:]
    parser.close(out)
    assert "".join(c.delta for c in out if isinstance(c, TextChunk)) == text
    assert all(isinstance(c, TextChunk) for c in out)
