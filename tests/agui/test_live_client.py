"""The real @ag-ui/client HttpAgent against a live loopgate on 127.0.0.1.

tests/node/agui-live.mjs runs every scenario and reports what the client saw; the terminal
event is asserted here, because runAgent() resolves even when a stream ends without one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.agui.node_client import clean
from tests.gateway.harness import running_gateway
from tests.node_clients import run_script


@pytest.fixture(scope="module")
def seen() -> Iterator[dict[str, Any]]:
    with running_gateway(scripted_delay_s=0.005) as (base, _):
        yield run_script("agui-live.mjs", base)


def text_of(summary: dict[str, Any]) -> str:
    return "".join(m.get("content") or "" for m in summary["messages"] if m["role"] == "assistant")


def test_text(seen: dict[str, Any]) -> None:
    run = clean(seen["text"])
    assert run["terminal"]["type"] == "RUN_FINISHED" and "outcome" not in run["terminal"]
    assert "TEXT_MESSAGE_CONTENT" in run["types"] and "plain hello there" in text_of(run)
    assert run["terminal"]["usage"][0]["totalTokens"] > 0


def test_reasoning(seen: dict[str, Any]) -> None:
    run = clean(seen["reasoning"])
    assert run["terminal"]["type"] == "RUN_FINISHED"
    assert {"REASONING_START", "REASONING_MESSAGE_CONTENT", "REASONING_END"} <= set(run["types"])
    reasoning = [m for m in run["messages"] if m["role"] == "reasoning"]
    assert reasoning and reasoning[0]["content"]


def test_tool_round(seen: dict[str, Any]) -> None:
    run = clean(seen["toolRound"])
    assert run["terminal"]["type"] == "RUN_FINISHED"
    assert run["types"].count("TOOL_CALL_START") == 2
    assert run["types"].count("TOOL_CALL_RESULT") == 2
    tool_messages = [m for m in run["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 2
    calculated = next(m["content"] for m in tool_messages if m["content"].strip().isdigit())
    assert calculated in text_of(run)  # the final answer uses the observation


def test_frontend_tool_round_trip(seen: dict[str, Any]) -> None:
    result = seen["frontendTool"]
    first, second = clean(result["first"]), clean(result["second"])
    assert first["terminal"]["outcome"]["type"] == "success"
    assert (
        result["pending"]
        and first["terminal"]["outcome"]["pendingToolCallIds"] == result["pending"]
    )
    assert "TOOL_CALL_RESULT" not in first["types"]  # the browser runs it, not the server
    assert second["terminal"]["type"] == "RUN_FINISHED"
    assert "teal" in text_of(second)


def test_interrupt_then_resume(seen: dict[str, Any]) -> None:
    result = seen["interruptResume"]
    first, second = clean(result["first"]), clean(result["second"])
    outcome = first["terminal"]["outcome"]
    assert outcome["type"] == "interrupt" and len(outcome["interrupts"]) == 1
    assert "which option" in outcome["interrupts"][0]["message"]
    assert second["terminal"]["type"] == "RUN_FINISHED" and "outcome" not in second["terminal"]
    assert "option B" in text_of(second)


def test_cancelled_run_ends_with_a_cancelled_outcome(seen: dict[str, Any]) -> None:
    run = clean(seen["cancelled"])
    assert run["terminal"]["type"] == "RUN_FINISHED"
    assert run["terminal"]["outcome"] == {"type": "cancelled"}


def test_a_client_that_aborts_cancels_the_run(seen: dict[str, Any]) -> None:
    run = seen["aborted"]
    assert run["terminal"]["type"] == "RUN_ERROR" and run["terminal"]["code"] == "abort"
    assert run["serverStatus"] == "cancelled"
