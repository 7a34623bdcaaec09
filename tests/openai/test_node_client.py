"""The official ``openai`` npm client against a live loopgate (tests/node/openai-client.mjs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gateway.harness import running_gateway
from tests.node_clients import node_clients, run_script

TOKEN = "node-s3cret-012345"


@pytest.fixture(scope="module")
def seen() -> Iterator[dict[str, Any]]:
    node_clients()  # before the gateway starts
    # With a token, as a gateway on the network runs: every scenario's client sends it.
    with running_gateway(scripted_delay_s=0.002, token=TOKEN) as (base, _):
        yield run_script("openai-client.mjs", base, TOKEN)


def ran(seen: dict[str, Any], name: str) -> dict[str, Any]:
    result = seen[name]
    assert "crashed" not in result, result.get("crashed")
    return result  # type: ignore[no-any-return]


def test_models(seen: dict[str, Any]) -> None:
    assert ran(seen, "models") == {
        "ids": ["loopgate", "loopgate-scripted"],
        "objects": ["model", "model"],
    }


def test_a_whole_answer(seen: dict[str, Any]) -> None:
    answer = ran(seen, "nonStream")
    assert answer["object"] == "chat.completion" and answer["id"].startswith("chatcmpl-run_")
    assert answer["finish"] == "stop" and "(UTC) right now" in answer["content"]
    assert "clock" in answer["reasoning"]
    assert (
        answer["usage"]["total_tokens"]
        == (answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"])
        > 0
    )
    assert answer["events"][0] == "stage_start" and answer["events"][-1] == "completion"
    assert "tool_call_start" in answer["events"]


def test_a_streamed_answer_with_usage(seen: dict[str, Any]) -> None:
    stream = ran(seen, "stream")
    assert stream["objects"] == ["chat.completion.chunk"] and stream["firstRole"] == "assistant"
    assert "(UTC) right now" in stream["content"] and "clock" in stream["reasoning"]
    assert stream["finish"] == ["stop"]
    assert stream["lastChoices"] == 0 and stream["usage"]["total_tokens"] > 0
    assert stream["serverTools"] == ["clock"]


def test_the_sdk_stream_helper(seen: dict[str, Any]) -> None:
    helper = ran(seen, "streamHelper")
    assert helper["finish"] == "stop" and "think about the sky" in helper["content"]
    assert helper["usage"]["total_tokens"] > 0


def test_a_client_tool_round_trip(seen: dict[str, Any]) -> None:
    trip = ran(seen, "clientTool")
    assert trip["firstFinish"] == "tool_calls"
    assert [(c["type"], c["name"]) for c in trip["calls"]] == [("function", "confirm_booking")]
    assert trip["calls"][0]["arguments"]["topic"].startswith("client tool")
    assert trip["secondFinish"] == "stop"
    assert trip["answer"] == "The client answered: booked: friday 10:00."


def test_the_sdk_runs_a_streamed_client_tool_itself(seen: dict[str, Any]) -> None:
    runner = ran(seen, "clientToolStreamed")
    assert len(runner["ran"]) == 1 and runner["ran"][0]["topic"].startswith("client tool")
    assert runner["messages"] == ["user", "assistant", "tool", "assistant"]
    assert runner["answer"] == "The client answered: booked: monday 09:30."


def test_bad_requests_raise_the_sdks_own_errors(seen: dict[str, Any]) -> None:
    model, body = ran(seen, "badModel"), ran(seen, "badBody")
    assert model["class"] == "NotFoundError" and model["status"] == 404
    assert model["error"]["code"] == "model_not_found" and model["error"]["param"] == "model"
    assert "The model 'gpt-none' does not exist here" in model["message"]
    assert body["class"] == "BadRequestError" and body["status"] == 400
    assert body["error"]["param"] == "messages[0].role"
    assert body["error"]["type"] == "invalid_request_error"


def test_a_failed_stream_raises_an_api_error(seen: dict[str, Any]) -> None:
    failed = ran(seen, "failedStream")
    assert failed["isAPIError"] and failed["message"] == "the scripted model lost its connection"
    assert failed["error"]["code"] == "provider_error" and failed["text"]


def test_a_wrong_key_is_an_authentication_error_that_says_so(seen: dict[str, Any]) -> None:
    wrong = ran(seen, "wrongKey")
    assert wrong["class"] == "AuthenticationError" and wrong["status"] == 401
    assert wrong["error"]["code"] == "invalid_api_key"
    assert wrong["error"]["type"] == "invalid_request_error"
    assert wrong["message"].startswith("401 Incorrect API key provided:")
    assert "wrong-key" not in wrong["message"]


def test_a_path_loopgate_does_not_serve_is_openais_unknown_url(seen: dict[str, Any]) -> None:
    unknown = ran(seen, "unknownRoute")
    assert unknown["class"] == "NotFoundError" and unknown["error"]["code"] == "unknown_url"
    assert "no endpoint at POST /v1/embeddings" in unknown["message"]
