"""useChat's automatic resend against a real gateway, as docs/vercel.md recommends it
(``sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls``), with the ``ai``
package's own Chat and DefaultChatTransport (tests/node/vercel-autosend.mjs), counting the
requests the transport makes for one message.

The AI SDK resends once every tool call of the last step that the client runs has its output.
The loop's own calls say ``providerExecuted: true`` and never count; a client tool's call
(the request's ``tools``) does, once: the app's output goes back, and that is all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gateway.harness import running_gateway
from tests.node_clients import node_clients, run_script
from tests.vercel.test_node_client import parts, ran


@pytest.fixture(scope="module")
def reference() -> Iterator[dict[str, Any]]:
    node_clients()  # before the gateway starts
    with running_gateway(scripted_delay_s=0.002) as (base, _):
        yield run_script("vercel-autosend.mjs", "reference", base)


@pytest.fixture(scope="module")
def one_round() -> Iterator[dict[str, Any]]:
    node_clients()  # before the gateway starts
    with running_gateway(loop="tests.vercel.one_round_loop:loop") as (base, _):
        yield run_script("vercel-autosend.mjs", "one-round", base)


def settled(results: dict[str, Any], name: str, requests: int) -> dict[str, Any]:
    """A chat that made ``requests`` requests and is ready: no error, nothing refused."""
    chat = ran(results, name)
    assert len(chat["requests"]) == requests, [r["trigger"] for r in chat["requests"]]
    assert chat["status"] == "ready" and chat["errors"] == [], chat["errors"]
    return chat


def loop_tools(message: dict[str, Any]) -> list[dict[str, Any]]:
    tools = [p for p in message["parts"] if p["type"].startswith("tool-")]
    assert tools
    return tools


@pytest.mark.parametrize("name", ["oneTool", "twoTools"])
def test_a_tool_round_is_one_request(reference: dict[str, Any], name: str) -> None:
    chat = settled(reference, name, 1)
    answer = chat["messages"][-1]
    for call in loop_tools(answer):
        assert call["state"] == "output-available" and call["providerExecuted"] is True
    assert chat["toolCalls"] == []  # the loop's calls are not the app's onToolCall's
    assert [f["finishReason"] for f in chat["finishes"]] == ["stop"]


def test_the_calls_of_a_tool_round_are_both_the_loops(reference: dict[str, Any]) -> None:
    answer = settled(reference, "twoTools", 1)["messages"][-1]
    assert [p["type"] for p in loop_tools(answer)] == ["tool-clock", "tool-calculate"]
    assert "402" in parts(answer, "text")[-1]["text"]


def test_a_call_and_its_answer_in_one_step_is_one_request(one_round: dict[str, Any]) -> None:
    chat = settled(one_round, "oneRound", 1)
    answer = chat["messages"][-1]
    (call,) = loop_tools(answer)
    assert call["state"] == "output-available" and call["providerExecuted"] is True
    # The call and the answer in the last step: what the AI SDK would take for a client's.
    assert [p["type"] for p in answer["parts"]] == ["step-start", "tool-lookup", "text"]


def test_a_question_waits_for_the_users_answer(reference: dict[str, Any]) -> None:
    chat = settled(reference, "askUser", 2)  # the question; the answer, sent by the user
    assert [r["trigger"] for r in chat["requests"]] == ["submit-message"] * 2
    question, answer = chat["messages"][1], chat["messages"][3]
    (ask,) = loop_tools(question)
    assert ask["type"] == "tool-ask_user" and ask["providerExecuted"] is True
    asked = parts(question, "text")[-1]["text"]
    assert asked.endswith("which option do you prefer, A or B?")
    assert question["metadata"]["loopgate"]["waiting"] == [ask["toolCallId"]]
    # The next user message is the question's answer: the loop gets it as the call's result.
    assert (
        parts(answer, "text")[-1]["text"] == "Thanks — you said: B, please. Continuing with that."
    )


def test_a_budget_stop_is_one_request(reference: dict[str, Any]) -> None:
    chat = settled(reference, "forever", 1)
    answer = chat["messages"][-1]
    assert len(loop_tools(answer)) == 3  # max_rounds: 3, a call each
    assert all(p["providerExecuted"] is True for p in loop_tools(answer))
    assert [f["finishReason"] for f in chat["finishes"]] == ["length"]
    assert answer["metadata"]["loopgate"]["status"] == "budget_exhausted"


def test_a_client_tool_is_sent_back_once(reference: dict[str, Any]) -> None:
    chat = settled(reference, "clientTool", 2)
    assert [c["toolName"] for c in chat["toolCalls"]] == ["confirm_booking"]
    assert [f["finishReason"] for f in chat["finishes"]] == ["tool-calls", "stop"]
    (sent,) = parts(chat["requests"][1]["messages"][-1], "tool-confirm_booking")
    assert sent["state"] == "output-available" and "providerExecuted" not in sent
    answer = chat["messages"][-1]
    (call,) = loop_tools(answer)
    assert "providerExecuted" not in call  # the client's, to the end
    assert parts(answer, "text")[-1]["text"] == "The client answered: booked."
