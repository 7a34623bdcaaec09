"""The small parts of the MCP adapter on their own: ids, URIs, lines, arguments, trace context."""

from __future__ import annotations

import anyio
import pytest
from mcp import types

from loopgate.adapters.mcp.calls import NO_TRACE, Trace, trace_of
from loopgate.adapters.mcp.messages import Refused, message_of
from loopgate.adapters.mcp.resources import NotARunLog, events_uri, run_of
from loopgate.adapters.mcp.server import progress_token
from loopgate.adapters.mcp.stdio import InFlight
from loopgate.adapters.mcp.tools import (
    ARGUMENTS,
    TOOLS,
    ArgumentError,
    RunArgs,
    parse_arguments,
)

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_event_log_uris_name_runs_and_nothing_else() -> None:
    for run_id in ("run_1", "a:b.c-d", "with space/slash"):
        assert run_of(events_uri(run_id)) == run_id
    for uri in (
        "loopgate://runs//events",
        "loopgate://runs/r1/events/x",
        "loopgate://runs/r1",
        "file:///r1/events",
        "loopgate://runs/r1/events?after=3",
    ):
        with pytest.raises(NotARunLog):
            run_of(uri)


def test_a_progress_token_is_a_string_or_an_integer() -> None:
    assert progress_token({"_meta": {"progressToken": 7}}) == 7
    assert progress_token({"_meta": {"progressToken": "p"}}) == "p"
    for params in (None, {}, {"_meta": None}, {"_meta": {"progressToken": True}}, {"_meta": 3}):
        assert progress_token(params) is None


def test_the_trace_context_comes_from_the_call_before_the_request() -> None:
    assert trace_of({"traceparent": PARENT.upper(), "tracestate": "a=1"}) == Trace(PARENT, "a=1")
    assert trace_of({"traceparent": "nonsense"}, {"traceparent": PARENT}) == Trace(PARENT)
    assert trace_of(None, {}) is NO_TRACE


def test_arguments_are_checked_against_the_tool() -> None:
    assert parse_arguments("run", {"prompt": "hi"}) == RunArgs(prompt="hi")
    assert parse_arguments("list_runs", None).limit == 20
    with pytest.raises(ArgumentError) as caught:
        parse_arguments("get_run", {"run_id": "x" * 200})
    assert caught.value.message == (
        "invalid arguments for get_run: Expected `str` of length <= 128 - at `run_id`"
    )
    for tool in TOOLS:  # each tool's schema and its Struct name the same arguments
        struct = ARGUMENTS[tool["name"]]
        assert set(tool["inputSchema"]["properties"]) == set(struct.__struct_fields__)


def test_lines_that_are_no_message_are_answered() -> None:
    ping = message_of(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 128)
    assert isinstance(ping, types.JSONRPCRequest)
    for line, code, request_id in (
        (b"{", types.PARSE_ERROR, None),
        (b"[" * 200 + b"]" * 200, types.PARSE_ERROR, None),
        (b"[]", types.INVALID_REQUEST, None),
        (b'{"jsonrpc":"1.0","id":"a","method":"ping"}', types.INVALID_REQUEST, "a"),
        (b'{"jsonrpc":"2.0","id":true}', types.INVALID_REQUEST, None),
    ):
        refused = message_of(line, 128)
        assert isinstance(refused, Refused), line
        assert (refused.code, refused.id) == (code, request_id), line


@pytest.mark.anyio
async def test_in_flight_calls_are_waited_for() -> None:
    calls = InFlight()
    await calls.idle()
    calls.add(1)
    calls.add("b")
    calls.done(1)
    with anyio.move_on_after(0.05) as waited:
        await calls.idle()
    assert waited.cancelled_caught
    calls.done("b")
    await calls.idle()
