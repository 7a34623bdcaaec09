"""What a useChat request becomes: the loop's history, client tools, and the refusals."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from loopgate.adapters.vercel.request import (
    DENIED,
    ChatRequest,
    check,
    client_tools,
    response_message_id,
    to_history,
)
from loopgate.contracts.client_errors import ClientError
from loopgate.contracts.history import NO_RESULT
from loopgate.contracts.messages import Message, ToolCall
from loopgate.contracts.parts import ImagePart, TextPart


def request(messages: list[dict[str, Any]], **extra: Any) -> ChatRequest:
    body = {"id": "chat-1", "messages": messages, "trigger": "submit-message", **extra}
    return msgspec.convert(body, ChatRequest)


def user(text: str, id: str = "u1") -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def test_a_conversation_as_the_transport_sends_it() -> None:
    """An assistant message's steps become assistant messages, each followed by its calls'
    results; reasoning stays with its step; data, sources and step markers are UI only."""
    body = request(
        [
            {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
            user("What time is it?"),
            {
                "id": "a1",
                "role": "assistant",
                "metadata": {"loopgate": {"runId": "run_1"}},
                "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "check the clock", "state": "done"},
                    {"type": "text", "text": "Let me look.", "state": "done"},
                    {
                        "type": "tool-clock",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {},
                        "output": "09:14",
                    },
                    {
                        "type": "dynamic-tool",
                        "toolName": "lookup",
                        "toolCallId": "c2",
                        "state": "output-available",
                        "input": {"q": 1},
                        "output": {"found": 3},
                    },
                    {"type": "data-loopgate-x_audit", "id": "run_1:9", "data": {"ok": True}},
                    {"type": "step-start"},
                    {"type": "text", "text": "It is 09:14.", "state": "done"},
                    {"type": "source-url", "sourceId": "s1", "url": "https://example.org"},
                ],
            },
            user("thanks", "u2"),
        ]
    )
    assert to_history(body) == [
        Message(role="system", content="Be brief."),
        Message(role="user", content="What time is it?"),
        Message(
            role="assistant",
            content="Let me look.",
            reasoning="check the clock",
            tool_calls=[
                ToolCall(id="c1", name="clock", arguments={}),
                ToolCall(id="c2", name="lookup", arguments={"q": 1}),
            ],
        ),
        Message(role="tool", tool_call_id="c1", name="clock", content="09:14"),
        Message(role="tool", tool_call_id="c2", name="lookup", content='{"found":3}'),
        Message(role="assistant", content="It is 09:14."),
        Message(role="user", content="thanks"),
    ]
    assert response_message_id(body) is None


def test_a_client_tool_output_continues_the_assistant_message() -> None:
    body = request(
        [
            user("client tool: book it"),
            {
                "id": "run_1",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {
                        "type": "tool-confirm_booking",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {"topic": "x"},
                        "output": "booked",
                    },
                ],
            },
        ],
        messageId="run_1",
    )
    history = to_history(body)
    assert history[-1] == Message(
        role="tool", tool_call_id="c1", name="confirm_booking", content="booked"
    )
    assert history[-2].tool_calls == [
        ToolCall(id="c1", name="confirm_booking", arguments={"topic": "x"})
    ]
    assert response_message_id(body) == "run_1"


@pytest.mark.parametrize(
    ("part", "result"),
    [
        ({"state": "output-error", "errorText": "boom"}, "Error: boom"),
        ({"state": "output-error"}, "Error: the tool failed"),
        ({"state": "output-denied"}, DENIED),
        ({"state": "input-available"}, NO_RESULT),  # never answered: models need a result
        ({"state": "approval-requested"}, NO_RESULT),
        ({"state": "output-available", "output": None}, "null"),
        ({"state": "output-available", "output": [1, 2]}, "[1,2]"),
    ],
)
def test_every_call_gets_a_result(part: dict[str, Any], result: str) -> None:
    tool = {"type": "tool-f", "toolCallId": "c1", "input": [1], **part}
    history = to_history(request([user("go"), {"id": "a", "role": "assistant", "parts": [tool]}]))
    assert history[-2].tool_calls == [ToolCall(id="c1", name="f", arguments={"_value": [1]})]
    assert history[-1].content == result


def asked(metadata: dict[str, Any]) -> dict[str, Any]:
    """An answer whose run asked the user something (the ask_user call c1, answered by the
    loop with the question)."""
    ask = {
        "type": "tool-ask_user",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {"question": "A or B?"},
        "output": "A or B?",
        "providerExecuted": True,
    }
    parts = [{"type": "step-start"}, ask, {"type": "text", "text": "A or B?", "state": "done"}]
    return {"id": "a1", "role": "assistant", "metadata": metadata, "parts": parts}


def test_the_message_after_a_question_is_its_answer() -> None:
    waiting = {"loopgate": {"status": "waiting_user", "reason": "ask_user", "waiting": ["c1"]}}
    history = to_history(request([user("plan my trip"), asked(waiting), user("B", "u2")]))
    call = ToolCall(id="c1", name="ask_user", arguments={"question": "A or B?"})
    answered = [
        Message(role="user", content="plan my trip"),
        Message(role="assistant", content="A or B?", tool_calls=[call]),
        Message(role="tool", content="B", tool_call_id="c1", name="ask_user"),
    ]
    assert history == answered
    # Turns later, the conversation is still the one the loop saw.
    reply = {"id": "a2", "role": "assistant", "parts": [{"type": "text", "text": "Done."}]}
    later = [user("plan my trip"), asked(waiting), user("B", "u2"), reply, user("more", "u3")]
    assert to_history(request(later)) == [
        *answered,
        Message(role="assistant", content="Done."),
        Message(role="user", content="more"),
    ]


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        {"loopgate": {"status": "completed", "waiting": ["c1"]}},  # merged from an older finish
        {"loopgate": {"status": "waiting_user", "waiting": ["no-such-call"]}},
        {"loopgate": {"status": "waiting_user", "waiting": "c1"}},
    ],
)
def test_a_message_that_answers_no_question_is_the_users(metadata: Any) -> None:
    history = to_history(request([user("plan my trip"), asked(metadata), user("B", "u2")]))
    assert history[-2:] == [
        Message(role="tool", content="A or B?", tool_call_id="c1", name="ask_user"),
        Message(role="user", content="B"),
    ]


def test_a_steering_message_is_the_users_between_steps() -> None:
    parts = [
        {"type": "step-start"},
        {"type": "text", "text": "Working on it."},
        {"type": "steering-message", "id": "s1", "parts": [{"type": "text", "text": "shorter"}]},
        {"type": "step-start"},
        {"type": "text", "text": "Done."},
    ]
    history = to_history(request([user("go"), {"id": "a", "role": "assistant", "parts": parts}]))
    assert [(m.role, m.content) for m in history] == [
        ("user", "go"),
        ("assistant", "Working on it."),
        ("user", "shorter"),
        ("assistant", "Done."),
    ]


def test_files_become_parts_and_reasoning_alone_is_dropped() -> None:
    body = request(
        [
            {
                "id": "u1",
                "role": "user",
                "parts": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "file",
                        "mediaType": "image/png",
                        "filename": "a.png",
                        "url": "https://example.com/a.png",
                    },
                    {"type": "data-app", "data": {"x": 1}},
                ],
            },
            {"id": "a", "role": "assistant", "parts": [{"type": "reasoning", "text": "hm"}]},
        ]
    )
    image = ImagePart(media_type="image/png", url="https://example.com/a.png", name="a.png")
    assert to_history(body) == [Message(role="user", content=[TextPart(text="look"), image])]


def test_client_tools() -> None:
    body = request(
        [user("hi")],
        tools=[
            {"name": "pick", "description": "Pick one"},
            {"name": "f", "parameters": {"type": "object"}},
        ],
    )
    specs = client_tools(body)
    assert [(s.name, s.description, s.parameters) for s in specs] == [
        ("pick", "Pick one", {"type": "object", "properties": {}}),
        ("f", "", {"type": "object"}),
    ]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"messages": []}, "messages must hold at least one message"),
        (
            {"messages": [user("x")], "tools": [{"name": "a"}, {"name": "a"}]},
            "tools: each name once (a repeated)",
        ),
        (
            {"messages": [{"role": "assistant", "parts": [{"type": "tool-f", "state": "x"}]}]},
            "messages[0].parts[0]: a tool-f part needs a toolCallId",
        ),
    ],
)
def test_check_refuses_what_the_types_cannot(body: dict[str, Any], says: str) -> None:
    with pytest.raises(ClientError) as refused:
        check(msgspec.convert(body, ChatRequest))
    assert refused.value.message == says


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "tool", "parts": []}]},
        {"messages": [{"role": "user"}]},
        {"messages": [user("x")], "trigger": "resume-stream"},
        {"messages": [user("x")], "tools": [{"name": "has space"}]},
        {"messages": [user("x")], "loopgate": {"detach": True}},
    ],
)
def test_the_types_refuse_malformed_bodies(body: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(body, ChatRequest)
