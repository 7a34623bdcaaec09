"""OpenAIProvider against a fake OpenAI-compatible server over real HTTP (httpx → uvicorn)."""

from __future__ import annotations

import json
import socket
import time

import anyio
import httpx
import pytest

from loopgate.contracts.messages import Message, ToolCall, ToolSpec
from loopgate.gateway.reference.openai import OpenAIProvider, SSEDecoder
from loopgate.gateway.reference.types import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from tests.fakes.openai_server import ERROR_MESSAGE, TOOL_CALLS, FakeOpenAI

USAGE = UsageChunk(prompt_tokens=12, completion_tokens=7, total_tokens=19, reasoning_tokens=3)
HELLO = [TextChunk("Hel"), TextChunk("lo, "), TextChunk("world"), TextChunk("!")]
SIMPLE = ModelRequest(messages=[Message(role="user", content="hi")])


async def collect(
    provider: OpenAIProvider, request: ModelRequest = SIMPLE
) -> tuple[list[ModelChunk], ProviderError | None]:
    chunks: list[ModelChunk] = []
    try:
        async for chunk in provider.stream(request):
            chunks.append(chunk)
    except ProviderError as exc:
        return chunks, exc
    return chunks, None


# --- successful streams ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_text_stream(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "text"))
    assert error is None
    assert chunks == [*HELLO, USAGE, FinishChunk("stop")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "scenario",
    [
        "reasoning",  # delta.reasoning_content (vLLM, DeepSeek)
        "reasoning-field",  # delta.reasoning (OpenRouter)
    ],
)
async def test_reasoning_then_content(fake: FakeOpenAI, base_url: str, scenario: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, scenario))
    assert error is None
    assert chunks == [
        ReasoningChunk("Let me"),
        ReasoningChunk(" think"),
        ReasoningChunk(" briefly."),
        TextChunk("2 + 2"),
        TextChunk(" = 4."),
        USAGE,
        FinishChunk("stop"),
    ]


@pytest.mark.anyio
async def test_parallel_tool_calls_pass_fragments_through(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "tools"))
    assert error is None
    assert chunks == [
        ToolCallChunk(index=0, id="call_weather_0", name="get_weather", arguments=""),
        ToolCallChunk(index=1, id="call_time_1", name="get_time", arguments=""),
        ToolCallChunk(index=0, arguments='{"ci'),
        ToolCallChunk(index=1, arguments='{"tz"'),
        ToolCallChunk(index=0, arguments='ty": '),
        ToolCallChunk(index=1, arguments=': "Eur'),
        ToolCallChunk(index=0, arguments='"Par'),
        ToolCallChunk(index=1, arguments="ope/"),
        ToolCallChunk(index=0, arguments='is"'),
        ToolCallChunk(index=1, arguments='Paris"'),
        ToolCallChunk(index=0, arguments=', "unit"'),
        ToolCallChunk(index=1, arguments="}"),
        ToolCallChunk(index=0, arguments=': "C"}'),
        USAGE,
        FinishChunk("tool_calls"),
    ]
    assembled: dict[int, str] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallChunk):
            assembled[chunk.index] = assembled.get(chunk.index, "") + chunk.arguments
    assert json.loads(assembled[0]) == {"city": "Paris", "unit": "C"}
    assert json.loads(assembled[1]) == {"tz": "Europe/Paris"}
    assert len(TOOL_CALLS) == 2


@pytest.mark.anyio
async def test_crlf_framing_comments_and_multiline_data(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "crlf"))
    assert error is None
    assert chunks == [*HELLO, USAGE, FinishChunk("stop")]


@pytest.mark.anyio
async def test_finish_without_done_sentinel_completes(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "no-done"))
    assert error is None
    assert chunks == [TextChunk("ok"), USAGE, FinishChunk("stop")]


@pytest.mark.anyio
async def test_stall_after_finish_is_not_an_error(fake: FakeOpenAI, base_url: str) -> None:
    provider = OpenAIProvider(base_url, "stall-after-finish", idle_timeout_s=0.3)
    chunks, error = await collect(provider)
    assert error is None
    assert chunks == [TextChunk("ok"), FinishChunk("stop")]


# --- the request on the wire ----------------------------------------------------------------


@pytest.mark.anyio
async def test_request_body_and_headers(fake: FakeOpenAI, base_url: str) -> None:
    request = ModelRequest(
        messages=[
            Message(role="system", content="Be brief."),
            Message(role="user", content="Weather in Paris?", name="ana"),
            Message(
                role="assistant",
                reasoning="the user wants weather",
                tool_calls=[
                    ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="call_2", name="get_time"),
                ],
            ),
            Message(role="tool", tool_call_id="call_1", name="get_weather", content="18 °C"),
            Message(role="tool", tool_call_id="call_2", content="12:00"),
            Message(role="assistant", content="It is 18 °C."),
        ],
        tools=[
            ToolSpec(
                name="get_weather",
                description="Current weather",
                parameters={"type": "object", "properties": {"city": {"type": "string"}}},
            ),
            ToolSpec(name="get_time"),
        ],
        temperature=0.2,
        max_tokens=256,
    )
    provider = OpenAIProvider(base_url + "/", "text", api_key="sk-test-123")
    chunks, error = await collect(provider, request)
    assert error is None and chunks[-1] == FinishChunk("stop")

    [recorded] = fake.requests
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["authorization"] == "Bearer sk-test-123"
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.headers["accept"] == "text/event-stream"
    assert recorded.body == {
        "model": "text",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?", "name": "ana"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
            {"role": "assistant", "content": "It is 18 °C."},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
        "temperature": 0.2,
        "max_tokens": 256,
    }


@pytest.mark.anyio
async def test_minimal_request_has_no_optional_fields(fake: FakeOpenAI, base_url: str) -> None:
    await collect(OpenAIProvider(base_url, "text"))
    [recorded] = fake.requests
    assert "authorization" not in recorded.headers
    assert recorded.body == {
        "model": "text",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.anyio
async def test_injected_client_is_used_and_left_open(fake: FakeOpenAI, base_url: str) -> None:
    async with httpx.AsyncClient(headers={"X-Fake-Scenario": "reasoning"}) as client:
        provider = OpenAIProvider(base_url, "text", client=client)
        first, _ = await collect(provider)
        second, _ = await collect(provider)
        assert not client.is_closed
    assert first == second
    assert first[0] == ReasoningChunk("Let me")
    assert len(fake.requests) == 2


# --- HTTP errors ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_http_500_with_json_error(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "error-500"))
    assert chunks == []
    assert error is not None
    assert error.message == f"model server returned HTTP 500: {ERROR_MESSAGE}"
    assert (error.retryable, error.status) == (True, 500)


@pytest.mark.anyio
async def test_http_429_is_retryable(fake: FakeOpenAI, base_url: str) -> None:
    _, error = await collect(OpenAIProvider(base_url, "error-429"))
    assert error is not None
    assert error.message == "model server returned HTTP 429: Rate limit reached for requests"
    assert (error.retryable, error.status) == (True, 429)


@pytest.mark.anyio
async def test_http_400_vllm_error_shape(fake: FakeOpenAI, base_url: str) -> None:
    _, error = await collect(OpenAIProvider(base_url, "error-400-vllm"))
    assert error is not None
    assert error.message == "model server returned HTTP 400: maximum context length exceeded"
    assert (error.retryable, error.status) == (False, 400)


@pytest.mark.anyio
async def test_error_message_is_sanitised_and_redacts_key(fake: FakeOpenAI, base_url: str) -> None:
    key = "sk-secret-abcdef"
    _, error = await collect(OpenAIProvider(base_url, "error-401-noisy", api_key=key))
    assert error is not None
    assert (error.retryable, error.status) == (False, 401)
    assert error.message.startswith(
        "model server returned HTTP 401: Incorrect API key provided: [redacted]. [31mSee docs x"
    )
    assert key not in error.message
    assert error.message.isprintable()
    assert error.message.endswith("…")
    assert len(error.message) <= len("model server returned HTTP 401: ") + 200


@pytest.mark.anyio
async def test_non_json_error_body_is_not_echoed(fake: FakeOpenAI, base_url: str) -> None:
    _, error = await collect(OpenAIProvider(base_url, "error-502-html"))
    assert error is not None
    assert error.message == "model server returned HTTP 502"
    assert (error.retryable, error.status) == (True, 502)


@pytest.mark.anyio
async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Userinfo and path must not reach the message.
    provider = OpenAIProvider(f"http://user:pw@127.0.0.1:{port}/v1", "text")
    chunks, error = await collect(provider)
    assert chunks == []
    assert error is not None
    assert error.message == f"could not connect to model server at http://127.0.0.1:{port}"
    assert (error.retryable, error.status) == (True, None)


# --- broken streams -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_connection_cut_mid_stream(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "cut"))
    assert chunks == [TextChunk("Hel")]
    assert error is not None
    assert error.message == "model stream ended unexpectedly"
    assert (error.retryable, error.status) == (True, None)


@pytest.mark.anyio
async def test_body_ends_without_finish_or_done(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "truncated"))
    assert chunks == [TextChunk("Hel")]
    assert error is not None
    assert error.message == "model stream ended unexpectedly"
    assert error.retryable


@pytest.mark.anyio
async def test_stalled_stream(fake: FakeOpenAI, base_url: str) -> None:
    provider = OpenAIProvider(base_url, "stall", idle_timeout_s=0.3)
    started = time.monotonic()
    chunks, error = await collect(provider)
    elapsed = time.monotonic() - started
    assert chunks == [TextChunk("Hel")]
    assert error is not None
    assert error.message == "model stream stalled for 0.3 s"
    assert error.retryable
    assert 0.3 <= elapsed < 3.0


@pytest.mark.anyio
async def test_server_never_sends_headers(fake: FakeOpenAI, base_url: str) -> None:
    provider = OpenAIProvider(base_url, "hang", timeout_s=0.3)
    chunks, error = await collect(provider)
    assert chunks == []
    assert error is not None
    assert (
        error.message == f"model server at {base_url[: -len('/v1')]} did not respond within 0.3 s"
    )
    assert error.retryable


@pytest.mark.anyio
async def test_malformed_chunk_json(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "malformed"))
    assert chunks == [TextChunk("Hel")]
    assert error is not None
    assert error.message == "model server sent a malformed stream chunk"
    assert (error.retryable, error.status) == (False, None)


@pytest.mark.anyio
async def test_error_event_mid_stream(fake: FakeOpenAI, base_url: str) -> None:
    chunks, error = await collect(OpenAIProvider(base_url, "error-midstream"))
    assert chunks == [TextChunk("Hel")]
    assert error is not None
    assert error.message == (
        "model server reported an error mid-stream: Upstream provider unavailable"
    )
    assert (error.retryable, error.status) == (True, 502)


@pytest.mark.anyio
async def test_response_size_bound(fake: FakeOpenAI, base_url: str) -> None:
    provider = OpenAIProvider(base_url, "big", max_response_bytes=5000)
    chunks, error = await collect(provider)
    assert error is not None
    assert error.message == "model response exceeded 5000 bytes"
    assert not error.retryable
    assert 0 < len(chunks) < 50
    assert all(chunk == TextChunk("x" * 100) for chunk in chunks)
    # The same stream is fine within the default bound.
    chunks, error = await collect(OpenAIProvider(base_url, "big"))
    assert error is None and len(chunks) == 201


@pytest.mark.anyio
async def test_consumer_can_stop_early_and_be_cancelled(fake: FakeOpenAI, base_url: str) -> None:
    provider = OpenAIProvider(base_url, "stall", idle_timeout_s=30.0)
    started = time.monotonic()
    stream = provider.stream(SIMPLE)
    assert await anext(stream) == TextChunk("Hel")
    await stream.aclose()
    with anyio.move_on_after(0.2) as scope:
        async for _ in provider.stream(SIMPLE):
            pass
    assert scope.cancelled_caught
    assert time.monotonic() - started < 3.0


# --- configuration --------------------------------------------------------------------------


def test_from_env_reports_what_is_missing() -> None:
    with pytest.raises(ValueError) as info:
        OpenAIProvider.from_env({"LOOPGATE_OPENAI_MODEL": " ", "OPENAI_API_KEY": "sk-x"})
    assert str(info.value) == (
        "the OpenAI provider is not configured; set LOOPGATE_OPENAI_BASE_URL "
        "(or OPENAI_BASE_URL) and LOOPGATE_OPENAI_MODEL"
    )
    with pytest.raises(ValueError, match=r"set LOOPGATE_OPENAI_MODEL$"):
        OpenAIProvider.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})


def test_from_env_prefers_loopgate_names() -> None:
    provider = OpenAIProvider.from_env(
        {
            "LOOPGATE_OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
            "OPENAI_BASE_URL": "http://127.0.0.1:9999/v1",
            "LOOPGATE_OPENAI_MODEL": "qwen3",
            "LOOPGATE_OPENAI_API_KEY": "sk-loopgate",
            "OPENAI_API_KEY": "sk-openai",
        },
        idle_timeout_s=5.0,
    )
    assert (provider.name, provider.model, provider.base_url) == (
        "openai",
        "qwen3",
        "http://127.0.0.1:8080/v1",
    )
    assert provider.idle_timeout_s == 5.0
    assert provider._headers()["Authorization"] == "Bearer sk-loopgate"
    assert "sk-" not in repr(provider)

    fallback = OpenAIProvider.from_env(
        {
            "OPENAI_BASE_URL": "https://api.example.com/v1",
            "LOOPGATE_OPENAI_MODEL": "m",
            "OPENAI_API_KEY": "sk-openai",
        }
    )
    assert fallback.base_url == "https://api.example.com/v1"
    assert fallback._headers()["Authorization"] == "Bearer sk-openai"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "127.0.0.1:8080/v1"}, "base_url must be an http"),
        ({"base_url": "ftp://host/v1"}, "base_url must be an http"),
        ({"model": ""}, "model must not be empty"),
        ({"idle_timeout_s": 0}, "^idle_timeout_s must be a positive number"),
        ({"timeout_s": float("inf")}, "^timeout_s must be a positive number"),
        ({"max_response_bytes": 0}, "max_response_bytes must be positive"),
    ],
)
def test_constructor_validates(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"base_url": "http://127.0.0.1:8080/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=match):
        OpenAIProvider(**args)  # type: ignore[arg-type]


# --- SSE framing ----------------------------------------------------------------------------

FRAMED = (
    b": comment\r\n"
    b"retry: 1000\r\n"
    b"\r\n"
    b"event: message\n"
    b"id: 1\n"
    b"data: one\n"
    b"\n"
    b"data:two-a\r"
    b"data:  two-b\r"
    b"\r"
    b"data\n"
    b"\n"
    b"data:\n"
    b"data\n"
    b"\n"
    b"data: [DONE]\r\n"
    b"\r\n"
)
FRAMED_EVENTS = [b"one", b"two-a\n two-b", b"\n", b"[DONE]"]


def test_sse_decoder_whole() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(FRAMED) + decoder.close() == FRAMED_EVENTS


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_sse_decoder_any_split(size: int) -> None:
    for offset in range(size):
        decoder = SSEDecoder()
        pieces = [FRAMED[:offset]] + [
            FRAMED[i : i + size] for i in range(offset, len(FRAMED), size)
        ]
        events = [event for piece in pieces for event in decoder.feed(piece)]
        assert events + decoder.close() == FRAMED_EVENTS, (size, offset)


def test_sse_decoder_end_of_stream() -> None:
    decoder = SSEDecoder()
    # A complete last line without its blank line is honoured …
    assert decoder.feed(b"data: a\n\ndata: [DONE]\n") == [b"a"]
    assert decoder.close() == [b"[DONE]"]
    # … an unterminated one is a truncated line and dropped.
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"cho') == []
    assert decoder.close() == []
    # CR then LF in the next feed is one line end, not a line end plus an empty line.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [b"a\nb"]
