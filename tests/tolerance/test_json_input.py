"""The shared bound on JSON nesting (contracts.json_input), and every decoder built on it."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from loopgate.adapters.acp.rpc import classify
from loopgate.adapters.agui.endpoints import parse_frame
from loopgate.adapters.agui.input import parse_arguments
from loopgate.adapters.shared.jsonrpc import ParseFailure, parse
from loopgate.contracts.envelope import (
    EnvelopeError,
    decode_envelope,
    decode_event,
    decode_recording,
)
from loopgate.contracts.json_input import (
    DEFAULT_MAX_DEPTH,
    JsonTooDeep,
    check_depth,
    decode,
    nesting_depth,
)
from loopgate.gateway.plugs.wire import decode as wire_decode

# What the issue sent: about 2 KB, 1,000 levels.
HOSTILE = b"[" * 1000 + b"]" * 1000
HOSTILE_OBJECT = b'{"a":' * 1000 + b"1" + b"}" * 1000


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


def random_value(rng: random.Random, depth: int) -> Any:
    pick = rng.random()
    if depth == 0 or pick < 0.3:
        return rng.choice([1, "x", '"[{', "]}\\", None, True, 2.5, "ü[", ""])
    if pick < 0.65:
        return [random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(["k", "[", "}", '"', "\\"]) + str(i): random_value(rng, depth - 1)
        for i in range(rng.randint(0, 3))
    }


def test_depth_is_exact_for_any_document_even_with_brackets_and_escapes_in_strings() -> None:
    rng = random.Random(13)
    for _ in range(500):
        value = random_value(rng, rng.randint(0, 12))
        encoded = json.dumps(value)
        assert nesting_depth(encoded) == depth_of(value), encoded
        assert nesting_depth(encoded.encode()) == depth_of(value), encoded


@pytest.mark.parametrize("raw", [b"1", b'"[[[["', b'["\\"[[["]', b"{}", b'{"a": "}}}"}'])
def test_depth_of_small_documents(raw: bytes) -> None:
    assert nesting_depth(raw) == depth_of(json.loads(raw))


def test_the_bound_is_inclusive_and_configurable() -> None:
    check_depth(nested(DEFAULT_MAX_DEPTH))
    with pytest.raises(JsonTooDeep, match=f"deeper than {DEFAULT_MAX_DEPTH} levels"):
        check_depth(nested(DEFAULT_MAX_DEPTH + 1))
    check_depth(nested(8), max_depth=8)
    with pytest.raises(JsonTooDeep, match="deeper than 7 levels"):
        check_depth(nested(8).decode(), max_depth=7)


def test_many_shallow_brackets_are_not_deep() -> None:
    wide = json.dumps([{"a": [i]} for i in range(5000)])
    assert wide.count("[") > DEFAULT_MAX_DEPTH
    assert decode(wide)[4999] == {"a": [4999]}


def test_too_deep_is_a_decode_error_and_a_value_error() -> None:
    """So every decoding site answers it as it answers malformed JSON, unchanged."""
    for raw in (HOSTILE, HOSTILE_OBJECT, HOSTILE.decode()):
        with pytest.raises(JsonTooDeep) as caught:
            decode(raw)
        assert isinstance(caught.value, msgspec.DecodeError)
        assert isinstance(caught.value, ValueError)


def test_typed_decoding_and_a_recursion_error_from_a_deep_stack() -> None:
    class Point(msgspec.Struct):
        x: int

    assert decode(b'{"x": 1}', Point) == Point(1)
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"x": "1"}', Point)

    class Exhausted:
        def decode(self, raw: bytes) -> Any:
            raise RecursionError

    with pytest.raises(JsonTooDeep):
        decode(b"[]", decoder=Exhausted())  # type: ignore[arg-type]


def test_msgspec_itself_recurses_without_the_bound() -> None:
    """Where the 500s came from: msgspec's decoder raises RecursionError (not DecodeError)
    at about the interpreter's recursion limit, which no endpoint caught."""
    with pytest.raises(RecursionError):
        msgspec.json.decode(HOSTILE)


@pytest.mark.parametrize("raw", [HOSTILE, HOSTILE_OBJECT])
def test_every_decoder_refuses_deep_json_with_its_own_error(raw: bytes) -> None:
    deep_event = b'{"kind": "x", "data": {"a": ' + raw + b"}}"
    with pytest.raises(EnvelopeError, match="nested deeper"):
        decode_event(deep_event)
    with pytest.raises(EnvelopeError, match="nested deeper"):
        decode_envelope(b'{"run_id":"r","seq":1,"ts":1,"kind":"x","data":{"a":' + raw + b"}}")
    with pytest.raises(EnvelopeError, match="nested deeper"):
        decode_recording(deep_event, "r", "deep.jsonl")
    with pytest.raises(ParseFailure, match="nested deeper"):
        parse(raw)
    message, error = classify(raw)
    assert message is None and error is not None
    assert error["error"]["code"] == -32700 and "nested deeper" in error["error"]["message"]
    with pytest.raises(msgspec.DecodeError):
        parse_frame(raw)
    with pytest.raises(ValueError, match="nested deeper"):
        wire_decode(raw)
    # A tool call's arguments arrive as JSON text inside AG-UI messages: kept as text.
    assert parse_arguments(raw.decode()) == {"_raw": raw.decode()}
