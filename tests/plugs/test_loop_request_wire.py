"""What docs/loops.md says an HTTP or stdio loop is sent and may answer, checked on the wire.

The run request's ``input`` and ``messages`` (with and without a new user message), the
``tool_calls`` inside ``messages`` and the client's ``tools``, sent by the OpenAI SDK — a
client that keeps its own history and runs its own tools — to a real gateway whose loop echoes
what it received; and the NDJSON media types an HTTP loop may answer with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from tests.fakes.servers import serve_app
from tests.gateway.harness import running_gateway
from tests.plugs.plugs import plugged_gateway
from tests.plugs.sample_http import TYPED, sample_app
from tests.plugs.test_plug_faults import GUARDS, run_to_end

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
ASKED = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "echo: look x up"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "x"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
]
# The same conversation as the loop receives it: loopgate's message shape, fields at their
# default (no content, no name) left out.
RECEIVED = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "echo: look x up"},
    {
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": {"q": "x"}}],
    },
    {"role": "tool", "content": "42", "tool_call_id": "call_1"},
]
TOOLS = [
    {
        "name": "lookup",
        "description": "Look a word up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


@pytest.fixture(scope="module", params=["http", "stdio"])
def client(request: pytest.FixtureRequest) -> Iterator[OpenAI]:
    with plugged_gateway(request.param) as (base, _):
        yield OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=20)


def received(client: OpenAI, messages: list[dict[str, Any]]) -> Any:
    answer = client.chat.completions.create(
        model="loopgate",
        messages=messages,  # type: ignore[arg-type]
        tools=[LOOKUP],  # type: ignore[list-item]
    )
    content = answer.choices[0].message.content
    assert content is not None
    return json.loads(content)


def test_a_conversation_ending_in_a_tool_result_is_all_messages_and_no_input(
    client: OpenAI,
) -> None:
    assert received(client, ASKED) == {"input": "", "messages": RECEIVED, "tools": TOOLS}


def test_a_new_user_message_is_the_input_and_the_rest_the_messages(client: OpenAI) -> None:
    then = {"role": "user", "content": "and y?"}
    assert received(client, [*ASKED, then]) == {
        "input": "and y?",
        "messages": RECEIVED,
        "tools": TOOLS,
    }


@pytest.fixture(scope="module")
def loop_server() -> Iterator[str]:
    with serve_app(sample_app()) as base:
        yield base


@pytest.mark.parametrize("kind", sorted(TYPED))
def test_an_http_loop_may_answer_any_ndjson_media_type(loop_server: str, kind: str) -> None:
    with running_gateway(loop_url=f"{loop_server}/typed/{kind}", **GUARDS) as (base, _):
        events = run_to_end(base, "hello typed")
    assert events[-1]["data"] == {"status": "completed", "reason": "stop"}
