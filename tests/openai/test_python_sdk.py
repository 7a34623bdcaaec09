"""The official ``openai`` Python SDK against a live loopgate (uvicorn on 127.0.0.1).

The embedded scripted model answers "What time is it?" with a ``clock`` call and text, and
"client tool: …" by calling the first tool the request offers (gateway/reference/scripted.py).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.gateway.harness import running_gateway
from tests.waiting import wait_until

pytestmark = pytest.mark.gateway(scripted_delay_s=0.002, max_body_bytes=64 * 1024)

MODEL = "loopgate-scripted"
BOOKING: Any = {
    "type": "function",
    "function": {
        "name": "confirm_booking",
        "description": "Confirm the booking with the user's calendar",
        "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}},
    },
}


@pytest.fixture
def client(gateway: str) -> OpenAI:
    # Retries off: the test sees the first answer (a retried failure would run again).
    return OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0)


def run_of(base: str, run_id: str) -> dict[str, Any]:
    return httpx.get(f"{base}/v1/runs/{run_id}").json()  # type: ignore[no-any-return]


def test_models_list_the_loop_and_its_alias(client: OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models] == ["loopgate", MODEL]
    assert {m.object for m in models} == {"model"} and {m.owned_by for m in models} == {"loopgate"}
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-none")
    assert missing.value.code == "model_not_found"


def test_a_whole_answer(client: OpenAI, gateway: str) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "What time is it?"}]
    )
    completion = raw.parse()
    run_id = raw.headers["x-request-id"]
    assert completion.id == f"chatcmpl-{run_id}" and completion.model == MODEL
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert "(UTC) right now" in (choice.message.content or "")
    assert "clock" in (getattr(choice.message, "reasoning_content", None) or "")
    assert choice.message.tool_calls is None  # the clock is the server's tool, not the client's
    assert completion.usage is not None and completion.usage.total_tokens > 0
    events = (completion.model_extra or {})["loopgate"]["events"]
    started = [e["data"]["name"] for e in events if e["kind"] == "tool_call_start"]
    assert started == ["clock"]
    assert run_of(gateway, run_id)["status"] == "completed"


def test_a_streamed_answer_ends_with_its_usage(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model="loopgate",
        messages=[
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "What time is it?"}]},
        ],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert {c.model for c in chunks} == {"loopgate"} and len({c.id for c in chunks}) == 1
    with_choice = [c for c in chunks if c.choices]
    assert with_choice[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in with_choice)
    assert "(UTC) right now" in text
    assert [c.choices[0].finish_reason for c in with_choice if c.choices[0].finish_reason] == [
        "stop"
    ]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


def test_the_sdk_stream_helper_accumulates_the_chunks(client: OpenAI) -> None:
    with client.chat.completions.stream(
        model=MODEL, messages=[{"role": "user", "content": "think about the sky"}]
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "stop"
    assert "think about the sky" in (final.choices[0].message.content or "")


def test_a_client_tool_round_trip(client: OpenAI) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "client tool: confirm the booking for friday"}
    ]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=[BOOKING])
    asked = first.choices[0]
    assert asked.finish_reason == "tool_calls" and asked.message.content is None
    calls = asked.message.tool_calls or []
    assert [c.function.name for c in calls] == ["confirm_booking"]  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments)["topic"].startswith("client tool")  # type: ignore[union-attr]
    messages.append(asked.message.model_dump(exclude_none=True))
    messages.append(
        {"role": "tool", "tool_call_id": calls[0].id, "content": "booked: friday 10:00"}
    )
    second = client.chat.completions.create(model=MODEL, messages=messages, tools=[BOOKING])
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "The client answered: booked: friday 10:00."


def test_a_streamed_client_tool_call(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "client tool: confirm the booking"}],
        tools=[BOOKING],
        stream=True,
    )
    chunks = list(stream)
    handed = [
        call
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
        for call in c.choices[0].delta.tool_calls
    ]
    assert [(h.index, h.type, h.function.name) for h in handed] == [  # type: ignore[union-attr]
        (0, "function", "confirm_booking")
    ]
    assert handed[0].id and json.loads(handed[0].function.arguments or "")  # type: ignore[union-attr]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert all(c.usage is None for c in chunks)  # not asked for


def test_bad_requests_raise_the_sdks_own_errors(client: OpenAI, gateway: str) -> None:
    user = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.NotFoundError) as model:
        client.chat.completions.create(model="gpt-none", messages=user)  # type: ignore[arg-type]
    assert model.value.code == "model_not_found" and model.value.param == "model"
    assert "The model 'gpt-none' does not exist here" in model.value.message
    with pytest.raises(openai.BadRequestError) as role:
        client.chat.completions.create(model=MODEL, messages=[{"role": "wizard", "content": "x"}])  # type: ignore[misc,list-item]
    assert role.value.param == "messages[0].role" and "Invalid value 'wizard'" in role.value.message
    assert role.value.type == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as temperature:
        client.chat.completions.create(model=MODEL, messages=user, temperature=3)  # type: ignore[arg-type]
    assert temperature.value.param == "temperature"
    with pytest.raises(openai.BadRequestError) as many:
        client.chat.completions.create(model=MODEL, messages=user, n=2)  # type: ignore[arg-type]
    assert many.value.param == "n"
    with pytest.raises(openai.BadRequestError) as none:
        client.chat.completions.create(model=MODEL, messages=[])
    assert none.value.param == "messages"
    with pytest.raises(openai.APIStatusError) as big:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "x" * 70_000}]
        )
    assert big.value.status_code == 413 and big.value.code == "request_too_large"
    # What the SDK cannot send: malformed and too deeply nested JSON, answered in the same shape.
    url = f"{gateway}/v1/chat/completions"
    for raw, says in [(b"{", "not valid JSON"), (b"[" * 200 + b"]" * 200, "nested deeper")]:
        answer = httpx.post(url, content=raw, headers={"content-type": "application/json"})
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and says in error["message"]
        assert "Traceback" not in answer.text


def test_a_failed_run(client: OpenAI, gateway: str) -> None:
    prompt = [{"role": "user", "content": "provider error, please"}]
    stream = client.chat.completions.create(model=MODEL, messages=prompt, stream=True)  # type: ignore[arg-type]
    text: list[str] = []
    with pytest.raises(openai.APIError) as streamed:
        for chunk in stream:
            text.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert streamed.value.message == "the scripted model lost its connection"
    assert streamed.value.code == "provider_error" and "".join(text)  # what came before stays

    before = len(httpx.get(f"{gateway}/v1/runs", params={"limit": 1000}).json()["runs"])
    retrying = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=2)
    with pytest.raises(openai.InternalServerError) as whole:
        retrying.chat.completions.create(model=MODEL, messages=prompt)  # type: ignore[arg-type]
    assert whole.value.code == "provider_error" and whole.value.type == "server_error"
    # x-should-retry: false — the SDK did not run the failed turn again.
    after = len(httpx.get(f"{gateway}/v1/runs", params={"limit": 1000}).json()["runs"])
    assert after == before + 1


def test_client_tools_named_like_the_loops_own_are_a_bad_request(client: OpenAI) -> None:
    clock = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as clash:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            tools=[clock],  # type: ignore[list-item]
        )
    assert "clash" in clash.value.message


def _running(base: str, prompt: str) -> dict[str, Any] | None:
    runs = httpx.get(f"{base}/v1/runs", params={"limit": 50}).json()["runs"]
    mine = [r for r in runs if r["state"] == "running" and r["input"][-1]["content"] == prompt]
    return mine[0] if mine else None


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_leaves_cancels_its_run(gateway: str, stream: bool) -> None:
    prompt = f"slow tool, streamed={stream}"
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "stream": stream}
    payload = json.dumps(body).encode()
    host, port = gateway.removeprefix("http://").split(":")
    # A bare socket: the test decides when the client goes away.
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\n"
            + f"content-length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        run = wait_until(lambda: _running(gateway, prompt), 10, "the run to start")
        # Synchronised on the run's own events: the 30-second tool has started.
        with httpx.stream("GET", f"{gateway}/v1/runs/{run['id']}/events", timeout=10) as events:
            for line in events.iter_lines():
                if '"kind":"tool_call_start"' in line:
                    break
    ended = wait_until(
        lambda: (r := run_of(gateway, run["id"]))["state"] == "finished" and r, 10, "its end"
    )
    assert ended["status"] == "cancelled"


def test_the_bearer_token_is_what_the_sdk_sends() -> None:
    with running_gateway(token="s3cret-0123456789") as (url, _):
        good = OpenAI(base_url=f"{url}/v1", api_key="s3cret-0123456789", max_retries=0)
        answer = good.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "plain hi"}]
        )
        assert answer.choices[0].finish_reason == "stop"
        bad = OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()


@pytest.fixture(scope="module")
def guarded_base() -> Iterator[str]:
    """A gateway with a token: what one on the network runs."""
    with running_gateway(token="s3cret-0123456789") as (url, _):
        yield url


def _without_key(request: httpx.Request) -> None:
    del request.headers["authorization"]


def test_a_wrong_or_missing_key_is_an_authentication_error_that_says_so(
    guarded_base: str,
) -> None:
    wrong = OpenAI(base_url=f"{guarded_base}/v1", api_key="wrong", max_retries=0)
    user: Any = [{"role": "user", "content": "hi"}]
    calls = [
        lambda: wrong.models.list(),
        lambda: wrong.models.retrieve(MODEL),
        lambda: wrong.chat.completions.create(model=MODEL, messages=user),
        lambda: wrong.chat.completions.create(model=MODEL, messages=user, stream=True),
        lambda: wrong.embeddings.create(model=MODEL, input="x"),  # a path loopgate lacks
    ]
    for call in calls:
        with pytest.raises(openai.AuthenticationError) as refused:
            call()
        error = refused.value
        assert error.status_code == 401 and error.code == "invalid_api_key"
        assert error.type == "invalid_request_error" and error.param is None
        assert str(error).startswith("Error code: 401 - Incorrect API key provided:")
        assert "gateway's token" in error.message and "wrong" not in error.message
        assert error.response.headers["www-authenticate"] == 'Bearer error="invalid_token"'

    keyless = OpenAI(
        base_url=f"{guarded_base}/v1",
        api_key="unsent",
        max_retries=0,
        http_client=httpx.Client(event_hooks={"request": [_without_key]}),
    )
    with pytest.raises(openai.AuthenticationError) as missing:
        keyless.models.list()
    assert missing.value.code is None and missing.value.type == "invalid_request_error"
    assert "You didn't provide an API key" in missing.value.message


def test_the_gateways_other_refusals_on_openai_paths_are_openais_shape(guarded_base: str) -> None:
    client = OpenAI(base_url=f"{guarded_base}/v1", api_key="s3cret-0123456789", max_retries=0)
    user: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.NotFoundError) as unknown:
        client.embeddings.create(model=MODEL, input="x")
    assert unknown.value.code == "unknown_url" and unknown.value.type == "invalid_request_error"
    assert "no endpoint at POST /v1/embeddings" in unknown.value.message
    assert "POST /v1/chat/completions" in unknown.value.message
    with pytest.raises(openai.APIStatusError) as method:
        client.chat.completions.list()  # stored completions: GET, which loopgate does not serve
    assert method.value.status_code == 405 and method.value.response.headers["allow"] == "POST"
    assert "/v1/chat/completions does not take GET" in method.value.message
    # A browser page of another site (the SDK in a page, dangerouslyAllowBrowser).
    page = OpenAI(
        base_url=f"{guarded_base}/v1",
        api_key="s3cret-0123456789",
        max_retries=0,
        default_headers={"origin": "https://elsewhere.example"},
    )
    with pytest.raises(openai.PermissionDeniedError) as origin:
        page.chat.completions.create(model=MODEL, messages=user)
    assert "cross-origin request from https://elsewhere.example refused" in origin.value.message
    assert origin.value.type == "invalid_request_error"


def test_the_native_api_keeps_its_problem_bodies(guarded_base: str) -> None:
    token = {"authorization": "Bearer s3cret-0123456789"}
    for path, headers, status in [
        ("/v1/runs", {}, 401),
        ("/v1/runs", {"authorization": "Bearer wrong"}, 401),
        ("/v1/runs/run_x/nothing", token, 404),
        ("/v1/contract", {**token, "origin": "https://elsewhere.example"}, 403),
        ("/nothing", token, 404),
    ]:
        method = "POST" if "origin" in headers else "GET"
        answer = httpx.request(method, f"{guarded_base}{path}", headers=headers)
        assert answer.status_code == status, (path, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["status"] == status and answer.json()["detail"]


def test_a_full_gateway_is_openais_rate_limit() -> None:
    with running_gateway(max_active_runs=1, max_queued_runs=0) as (url, _):
        busy = httpx.post(f"{url}/v1/runs", json={"input": "slow tool"}).json()["id"]
        try:
            client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            with pytest.raises(openai.RateLimitError) as full:
                client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "plain hi"}]
                )
            assert (
                full.value.code == "rate_limit_exceeded" and full.value.type == "rate_limit_error"
            )
            assert "active runs" in full.value.message
            assert int(full.value.response.headers["retry-after"]) >= 1
        finally:
            httpx.post(f"{url}/v1/runs/{busy}/cancel")
