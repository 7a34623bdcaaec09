"""A fake OpenAI-compatible chat-completions server with scripted, selectable behaviours.

``POST /v1/chat/completions`` answers with the scenario named by the ``X-Fake-Scenario`` header
or, failing that, by the request's ``model``. Streams are real ``chat.completion.chunk`` objects
framed as the OpenAI API frames them; every request is recorded for assertions.

``transcript-NAME`` plays ``transcripts/NAME.json``: what a real local model streams when its
server has no tool (or reasoning) parser, token by token — ``<think>`` and ``<tool_call>`` as
content. Its n-th reply answers a request with n tool results after the last user message.

    fake = FakeOpenAI()
    with serve_app(fake.app) as url:
        provider = OpenAIProvider(f"{url}/v1", model="text")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

__all__ = ["SCENARIOS", "TRANSCRIPTS", "FakeOpenAI", "RecordedRequest", "Transcript"]

CREATED = 1_700_000_000
CHUNK_ID = "chatcmpl-fake0001"
FINGERPRINT = "fp_fake"

TEXT_PARTS = ["Hel", "lo, ", "world", "!"]
REASONING_PARTS = ["Let me", " think", " briefly."]
ANSWER_PARTS = ["2 + 2", " = 4."]
USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 7,
    "total_tokens": 19,
    "prompt_tokens_details": {"cached_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 3, "accepted_prediction_tokens": 0},
}
# Two parallel tool calls whose argument text arrives in small, interleaved fragments.
TOOL_CALLS = [
    ("call_weather_0", "get_weather", ['{"ci', 'ty": ', '"Par', 'is"', ', "unit"', ': "C"}']),
    ("call_time_1", "get_time", ['{"tz"', ': "Eur', "ope/", 'Paris"', "}"]),
]
ERROR_MESSAGE = "The server had an error while processing your request."


class RecordedRequest(msgspec.Struct):
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any
    at: float = 0.0  # time.monotonic() when it arrived


# Scenarios that fail their first requests and then answer, for retries: name → the failures,
# in order (each "429" answers with Retry-After: 1, "503" plainly, "reset" drops the connection
# before the first delta); the request after them streams the "text" scenario.
FLAKY: dict[str, tuple[str, ...]] = {
    "flaky-429": ("429",),
    "flaky-503": ("503", "503"),
    "flaky-reset": ("reset",),
    "flaky-503-forever": ("503",) * 100,
}


class _Wire:
    """The writing side of one streaming response, plus the client-disconnect signal."""

    def __init__(
        self,
        send: Send,
        receive: Receive,
        *,
        model: str,
        include_usage: bool,
        authorization: str,
        stall_s: float,
        body: Any = None,
        earlier: int = 0,
    ) -> None:
        self.body = body if isinstance(body, dict) else {}
        self.earlier = earlier  # requests for this scenario before this one
        self._send = send
        self._receive = receive
        self.model = model
        self.include_usage = include_usage
        self.authorization = authorization
        self.stall_s = stall_s

    async def start(
        self,
        status: int = 200,
        content_type: str = "text/event-stream",
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        await self._send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type.encode()),
                    (b"cache-control", b"no-cache"),
                    *headers,
                ],
            }
        )

    async def raw(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def data(self, payload: Any, eol: bytes = b"\n") -> None:
        await self.raw(b"data: " + json.dumps(payload).encode() + eol + eol)

    async def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        await self.data(self.chunk_object(delta, finish_reason))

    def chunk_object(self, delta: dict[str, Any], finish_reason: str | None = None) -> Any:
        obj: dict[str, Any] = {
            "id": CHUNK_ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if self.include_usage:
            obj["usage"] = None
        return obj

    async def usage(self) -> None:
        if self.include_usage:
            await self.data(self.usage_object())

    def usage_object(self) -> Any:
        return {
            "id": CHUNK_ID,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
            "choices": [],
            "usage": USAGE,
        }

    async def done(self) -> None:
        await self.raw(b"data: [DONE]\n\n")

    async def wait_for_disconnect(self, limit_s: float) -> None:
        with anyio.move_on_after(limit_s):
            while True:
                message: Message = await self._receive()
                if message["type"] == "http.disconnect":
                    return

    async def json_response(
        self, status: int, payload: Any, headers: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        await self.start(status, "application/json", headers)
        await self.raw(json.dumps(payload).encode())
        await self.end()


Script = Callable[[_Wire], Awaitable[None]]


async def _text(w: _Wire) -> None:
    await w.start()
    await w.chunk({"role": "assistant", "content": "", "refusal": None})
    for part in TEXT_PARTS:
        await w.chunk({"content": part})
    await w.chunk({}, "stop")
    await w.usage()
    await w.done()
    await w.end()


async def _reasoning(w: _Wire) -> None:
    """DeepSeek / vLLM shape: ``reasoning_content``, with ``content`` null meanwhile."""
    await w.start()
    await w.chunk({"role": "assistant", "content": None, "reasoning_content": ""})
    for part in REASONING_PARTS:
        await w.chunk({"content": None, "reasoning_content": part})
    for part in ANSWER_PARTS:
        await w.chunk({"content": part, "reasoning_content": None})
    await w.chunk({}, "stop")
    await w.usage()
    await w.done()
    await w.end()


async def _reasoning_field(w: _Wire) -> None:
    """OpenRouter shape: ``reasoning`` (plus ``reasoning_details``, which is ignored)."""
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    for part in REASONING_PARTS:
        await w.chunk(
            {
                "content": "",
                "reasoning": part,
                "reasoning_details": [{"type": "reasoning.text", "text": part}],
            }
        )
    for part in ANSWER_PARTS:
        await w.chunk({"content": part})
    await w.chunk({}, "stop")
    await w.usage()
    await w.done()
    await w.end()


async def _tools(w: _Wire) -> None:
    await w.start()
    await w.chunk({"role": "assistant", "content": None})
    for index, (call_id, name, _) in enumerate(TOOL_CALLS):
        await w.chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
    rounds = max(len(parts) for _, _, parts in TOOL_CALLS)
    for position in range(rounds):
        for index, (_, _, parts) in enumerate(TOOL_CALLS):
            if position < len(parts):
                fragment = {"index": index, "function": {"arguments": parts[position]}}
                await w.chunk({"tool_calls": [fragment]})
    await w.chunk({}, "tool_calls")
    await w.usage()
    await w.done()
    await w.end()


async def _error_500(w: _Wire) -> None:
    await w.json_response(
        500,
        {"error": {"message": ERROR_MESSAGE, "type": "server_error", "param": None, "code": None}},
    )


async def _error_429(w: _Wire) -> None:
    await w.json_response(
        429,
        {
            "error": {
                "message": "Rate limit reached for requests",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
    )


async def _error_400_vllm(w: _Wire) -> None:
    await w.json_response(
        400,
        {"object": "error", "message": "maximum context length exceeded", "code": 400},
    )


async def _error_401_noisy(w: _Wire) -> None:
    """Echoes the bearer token inside a long, multi-line message with control characters."""
    auth = w.authorization.removeprefix("Bearer ")
    message = f"Incorrect API key provided: {auth}.\r\n\x1b[31mSee\tdocs\x00 " + "x" * 400
    await w.json_response(401, {"error": {"message": message, "type": "invalid_request_error"}})


async def _error_502_html(w: _Wire) -> None:
    await w.start(502, "text/html")
    await w.raw(b"<html><body><h1>502 Bad Gateway</h1>nginx/1.25.3 internal-host-7</body></html>")
    await w.end()


def _flaky(failures: tuple[str, ...]) -> Script:
    async def play(w: _Wire) -> None:
        if w.earlier >= len(failures):
            await _text(w)
            return
        failure = failures[w.earlier]
        if failure == "429":
            error = {"message": "Rate limit reached for requests", "type": "requests"}
            await w.json_response(429, {"error": error}, [(b"retry-after", b"1")])
        elif failure == "503":
            error = {"message": "The engine is currently overloaded", "type": "server_error"}
            await w.json_response(503, {"error": error})
        else:
            # Headers and the role chunk, then the connection drops: no delta yet.
            await w.start()
            await w.chunk({"role": "assistant", "content": ""})

    return play


async def _cut(w: _Wire) -> None:
    """Closes the connection mid-body: the chunked encoding never gets its terminator."""
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "Hel"})
    # Returning without ``more_body: False`` makes uvicorn drop the connection.


async def _truncated(w: _Wire) -> None:
    """A well-formed HTTP body that simply stops: no finish_reason, no [DONE]."""
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "Hel"})
    await w.end()


async def _no_done(w: _Wire) -> None:
    """Some servers end after finish_reason (and usage) without the ``[DONE]`` sentinel."""
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "ok"})
    await w.chunk({}, "stop")
    await w.usage()
    await w.end()


async def _stall(w: _Wire) -> None:
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "Hel"})
    await w.wait_for_disconnect(w.stall_s)


async def _stall_after_finish(w: _Wire) -> None:
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "ok"})
    await w.chunk({}, "stop")
    await w.wait_for_disconnect(w.stall_s)


async def _hang(w: _Wire) -> None:
    """Never sends response headers (a server stuck before its first byte)."""
    await w.wait_for_disconnect(w.stall_s)


async def _malformed(w: _Wire) -> None:
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "Hel"})
    await w.raw(b'data: {"id": "chatcmpl-fake0001", "choices": [{"delta": {"content": "lo\n\n')
    await w.done()
    await w.end()


async def _error_midstream(w: _Wire) -> None:
    """OpenRouter-style failure after the stream opened."""
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    await w.chunk({"content": "Hel"})
    await w.data({"error": {"message": "Upstream provider\nunavailable", "code": 502}})
    await w.end()


async def _crlf(w: _Wire) -> None:
    """CRLF framing, comments, ignored fields, one event as multi-line data, split writes."""
    await w.start()
    await w.raw(b": OPENROUTER PROCESSING\r\n\r\n")
    await w.data(w.chunk_object({"role": "assistant", "content": ""}), eol=b"\r\n")
    first = json.dumps(w.chunk_object({"content": TEXT_PARTS[0]}), indent=1).encode()
    # A JSON object across several ``data:`` lines, joined back with LF, is still valid JSON.
    framed = b"event: message\r\nid: 7\r\n" + b"\r\n".join(
        b"data: " + line for line in first.split(b"\n")
    )
    await w.raw(framed + b"\r\n\r\n")
    for part in TEXT_PARTS[1:]:
        event = b"data:" + json.dumps(w.chunk_object({"content": part})).encode() + b"\r\n\r\n"
        # Byte-at-a-time around the CRLFs so line ends straddle reads where TCP allows.
        head, tail = event[:-6], event[-6:]
        await w.raw(head)
        for byte in tail:
            await w.raw(bytes([byte]))
            await anyio.sleep(0.001)
    await w.raw(b": keep-alive\r\n\r\n")
    await w.data(w.chunk_object({}, "stop"), eol=b"\r\n")
    await w.data(w.usage_object(), eol=b"\r\n")
    await w.raw(b"data: [DONE]\r\n\r\n")
    await w.end()


async def _big(w: _Wire) -> None:
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    for _ in range(200):
        await w.chunk({"content": "x" * 100})
        # Uvicorn's send never yields; without this, a client that hung up goes unnoticed
        # until the loop ends and asyncio logs every failed socket write.
        await anyio.lowlevel.checkpoint()
    await w.chunk({}, "stop")
    await w.done()
    await w.end()


async def _agent(w: _Wire) -> None:
    """A tiny tool-using model: ``use NAME {json}`` calls the tool NAME with those arguments;
    once the tool answered, it says ``NAME said: <result>``. Anything else is echoed."""
    messages = w.body.get("messages") or [{}]
    last = messages[-1]
    await w.start()
    if last.get("role") == "tool":
        calls = [c for m in messages for c in m.get("tool_calls") or []]
        name = next(
            (c["function"]["name"] for c in calls if c.get("id") == last.get("tool_call_id")), "?"
        )
        await w.chunk({"role": "assistant", "content": f"{name} said: "})
        await w.chunk({"content": str(last.get("content"))})
        await w.chunk({}, "stop")
    elif str(last.get("content", "")).startswith("use "):
        _, name, arguments = str(last["content"]).split(" ", 2)
        call = {"index": 0, "id": "call_agent_1", "type": "function"}
        call["function"] = {"name": name, "arguments": arguments}
        await w.chunk({"role": "assistant", "content": None, "tool_calls": [call]})
        await w.chunk({}, "tool_calls")
    else:
        await w.chunk({"role": "assistant", "content": f"echo: {last.get('content')}"})
        await w.chunk({}, "stop")
    await w.usage()
    await w.done()
    await w.end()


class TranscriptReply(msgspec.Struct, forbid_unknown_fields=True):
    content: list[str]  # the content deltas, as the server streamed them
    finish_reason: str = "stop"
    reasoning_content: list[str] = msgspec.field(default_factory=list)  # a reasoning parser's


class Transcript(msgspec.Struct, forbid_unknown_fields=True):
    model: str  # the model that writes this format
    served_by: str  # how it was served: which parsers were off
    replies: list[TranscriptReply]

    def text(self, reply: int) -> str:
        return "".join(self.replies[reply].content)


TRANSCRIPTS: dict[str, Transcript] = {
    path.stem: msgspec.json.decode(path.read_bytes(), type=Transcript)
    for path in sorted((Path(__file__).parent / "transcripts").glob("*.json"))
}


def _transcript(transcript: Transcript) -> Script:
    async def play(w: _Wire) -> None:
        messages = w.body.get("messages") or []
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        since = messages[users[-1] + 1 :] if users else messages
        answered = sum(1 for m in since if m.get("role") == "tool")
        reply = transcript.replies[min(answered, len(transcript.replies) - 1)]
        await w.start()
        await w.chunk({"role": "assistant", "content": ""})
        for part in reply.reasoning_content:
            await w.chunk({"content": None, "reasoning_content": part})
        for part in reply.content:
            await w.chunk({"content": part})
        await w.chunk({}, reply.finish_reason)
        await w.usage()
        await w.done()
        await w.end()

    return play


async def _parts(w: _Wire) -> None:
    """Streams the content deltas the last user message lists (a JSON array of strings), so a
    test can send one text split any way it likes; after a tool result, answers ``done``."""
    messages = w.body.get("messages") or [{}]
    last = messages[-1]
    parts = ["done"] if last.get("role") == "tool" else json.loads(str(last.get("content")))
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    for part in parts:
        await w.chunk({"content": part})
    await w.chunk({}, "stop")
    await w.usage()
    await w.done()
    await w.end()


async def _json(w: _Wire) -> None:
    """Structured output: answers ``{"n": 1}``, and ``{"n": "one"}`` once a user message says
    the answer was not what was asked for (the loop's repair round)."""
    messages = w.body.get("messages") or []
    told = any(
        m.get("role") == "user" and str(m.get("content", "")).startswith("Your answer is not")
        for m in messages
    )
    await w.start()
    await w.chunk({"role": "assistant", "content": ""})
    for part in ['{"n": ', '"one"}' if told else "1}"]:
        await w.chunk({"content": part})
    await w.chunk({}, "stop")
    await w.usage()
    await w.done()
    await w.end()


SCENARIOS: dict[str, Script] = {
    "json": _json,
    "agent": _agent,
    "text": _text,
    "reasoning": _reasoning,
    "reasoning-field": _reasoning_field,
    "tools": _tools,
    "error-500": _error_500,
    "error-429": _error_429,
    "error-400-vllm": _error_400_vllm,
    "error-401-noisy": _error_401_noisy,
    "error-502-html": _error_502_html,
    "cut": _cut,
    "truncated": _truncated,
    "no-done": _no_done,
    "stall": _stall,
    "stall-after-finish": _stall_after_finish,
    "hang": _hang,
    "malformed": _malformed,
    "error-midstream": _error_midstream,
    "crlf": _crlf,
    "big": _big,
    "parts": _parts,
    **{f"transcript-{name}": _transcript(t) for name, t in TRANSCRIPTS.items()},
    **{name: _flaky(failures) for name, failures in FLAKY.items()},
}


class FakeOpenAI:
    """The fake server's state (recorded requests) and its Starlette ``app``.

    ``stall_s`` caps how long a stalling scenario waits for the client to give up, so a test
    that forgets its idle timeout fails instead of hanging.
    """

    def __init__(self, *, stall_s: float = 10.0) -> None:
        self.stall_s = stall_s
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._seen: dict[str, int] = {}
        self.app = Starlette(
            routes=[Route("/v1/chat/completions", _Endpoint(self), methods=["POST"])]
        )

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._seen.clear()

    def _record(self, request: RecordedRequest, scenario: str) -> int:
        """Keep ``request``; how many requests for ``scenario`` came before it."""
        with self._lock:
            self._requests.append(request)
            earlier = self._seen.get(scenario, 0)
            self._seen[scenario] = earlier + 1
            return earlier


class _Endpoint:
    """A raw ASGI endpoint: scenarios need to misbehave below the Response abstraction."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self._fake = fake

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        model = body.get("model") if isinstance(body, dict) else None
        name = headers.get("x-fake-scenario") or model
        recorded = RecordedRequest(
            path=request.url.path, headers=headers, body=body, at=time.monotonic()
        )
        earlier = self._fake._record(recorded, str(name))

        stream_options = body.get("stream_options") if isinstance(body, dict) else None
        include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage")
        wire = _Wire(
            send,
            receive,
            model=str(model),
            include_usage=bool(include_usage),
            authorization=headers.get("authorization", ""),
            stall_s=self._fake.stall_s,
            body=body,
            earlier=earlier,
        )
        script = SCENARIOS.get(str(name))
        if script is None:
            await wire.json_response(
                404, {"error": {"message": f"unknown scenario {name!r}", "type": "not_found"}}
            )
            return
        await script(wire)
