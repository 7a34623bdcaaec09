"""A ModelProvider for OpenAI-compatible ``/chat/completions`` streaming servers.

Works with OpenAI itself and the servers that copy its wire format (vLLM, llama.cpp, Ollama,
LM Studio, DeepSeek, OpenRouter, …). Every failure surfaces as a :class:`ProviderError` whose
message is safe to show to a client: no exception text, no response bodies beyond a short,
sanitised ``error.message`` from the server's JSON error.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, aclosing
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import msgspec

from contracts.messages import Message, ToolSpec
from gateway.loop.types import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "OpenAIProvider", "SSEDecoder"]

# A long reasoning response is ~100k chunks of ~300 bytes of JSON envelope each, hence 64 MiB.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024

_MAX_ERROR_BODY_BYTES = 64 * 1024
_MAX_ERROR_MESSAGE_CHARS = 200
_RETRYABLE_STATUS = frozenset({408, 429})

# --- SSE framing ----------------------------------------------------------------------------


class SSEDecoder:
    """Incremental decoder for the ``data`` of server-sent events (WHATWG ``text/event-stream``).

    Feed it bytes as they arrive; it returns the data of each complete event. Lines may end in
    LF, CRLF or a lone CR, split anywhere across feeds. Comments and fields other than ``data``
    are ignored (``event``/``id``/``retry`` mean nothing to a chat-completions stream).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        # A CR at the very end of a feed may be the first half of a CRLF split across feeds.
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        self._buffer += chunk
        events: list[bytes] = []
        for line in self._complete_lines():
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[bytes]:
        """End of stream: dispatch a last event that lacks its blank line.

        The spec discards such an event; real servers sometimes end on ``data: [DONE]\\n``, so
        a last *complete* line is honoured. An unterminated line is a truncated one: dropped.
        """
        self._buffer.clear()
        event = b"\n".join(self._data)
        self._data = []
        return [event] if event else []

    def _complete_lines(self) -> Iterator[bytes]:
        buf = self._buffer
        start = 0
        while True:
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if lf != -1 and (cr == -1 or lf < cr):
                yield bytes(buf[start:lf])
                start = lf + 1
                continue
            yield bytes(buf[start:cr])
            if cr + 1 < len(buf):
                start = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
            else:
                start = cr + 1
                self._pending_cr = True
        del buf[:start]

    def _process_line(self, line: bytes) -> bytes | None:
        if not line:
            event = b"\n".join(self._data)
            self._data = []
            # As the spec says: an event whose data is empty is not dispatched.
            return event or None
        if line.startswith(b":"):
            return None
        field, sep, value = line.partition(b":")
        if field != b"data":
            return None
        if sep and value.startswith(b" "):
            value = value[1:]
        self._data.append(value)
        return None


# --- wire types (decoding only; unknown fields are ignored) -----------------------------------


class _Function(msgspec.Struct):
    name: str | None = None
    # Some servers send a parsed object instead of the JSON text the API specifies.
    arguments: str | dict[str, Any] | None = None


class _ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _ErrorBody(msgspec.Struct):
    message: Any = None
    code: Any = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    # OpenRouter, vLLM and others report failures mid-stream as ``data: {"error": {...}}``.
    error: _ErrorBody | str | None = None


class _ErrorResponse(msgspec.Struct):
    error: _ErrorBody | str | None = None
    # vLLM's older shape: {"object": "error", "message": "...", "code": 400}
    message: Any = None


_chunk_decoder = msgspec.json.Decoder(_Chunk)
_error_decoder = msgspec.json.Decoder(_ErrorResponse)


# --- the provider ---------------------------------------------------------------------------


class OpenAIProvider:
    """Streams chat completions from an OpenAI-compatible server.

    Timeouts: ``connect_timeout_s`` bounds the TCP/TLS connect; ``timeout_s`` bounds everything
    up to the response headers (connect, sending the request, the server's time to first byte);
    ``idle_timeout_s`` bounds the silence between body bytes once the stream is open. There is
    no total deadline: a healthy stream may legitimately run for many minutes.

    Pass ``client`` to share a connection pool; the provider never closes a client it was given.
    Without one, each ``stream()`` call uses (and closes) its own client, so a provider is safe
    to use from several event loops.

    Chunk order contract: text, reasoning and tool-call fragments in arrival order, then at most
    one :class:`UsageChunk`, then at most one :class:`FinishChunk`, always last.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        idle_timeout_s: float = 60.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError("model must not be empty")
        for label, value in (
            ("timeout_s", timeout_s),
            ("connect_timeout_s", connect_timeout_s),
            ("idle_timeout_s", idle_timeout_s),
        ):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{label} must be a positive number of seconds")
        if max_response_bytes <= 0:
            raise ValueError("max_response_bytes must be positive")
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key or None
        self._client = client
        self._url = base_url.rstrip("/") + "/chat/completions"
        # Only scheme://host:port goes into messages: the URL may embed credentials or tokens.
        port = f":{parts.port}" if parts.port else ""
        self._origin = f"{parts.scheme}://{parts.hostname}{port}"

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> OpenAIProvider:
        """Build a provider from ``LOOPGATE_OPENAI_*`` settings (``OPENAI_*`` as fallbacks)."""

        def setting(*names: str) -> str | None:
            for key in names:
                value = env.get(key, "").strip()
                if value:
                    return value
            return None

        base_url = setting("LOOPGATE_OPENAI_BASE_URL", "OPENAI_BASE_URL")
        model = setting("LOOPGATE_OPENAI_MODEL")
        api_key = setting("LOOPGATE_OPENAI_API_KEY", "OPENAI_API_KEY")
        missing = []
        if base_url is None:
            missing.append("LOOPGATE_OPENAI_BASE_URL (or OPENAI_BASE_URL)")
        if model is None:
            missing.append("LOOPGATE_OPENAI_MODEL")
        if base_url is None or model is None:
            raise ValueError("the OpenAI provider is not configured; set " + " and ".join(missing))
        return cls(base_url, model, api_key, **kwargs)

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self._origin!r}, model={self.model!r})"

    # -- request ---------------------------------------------------------------------------

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent to ``/chat/completions`` for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_message_to_wire(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool_to_wire(t) for t in request.tools]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return body

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            # Compressed SSE is buffered by proxies and would let a small body inflate past
            # the size bound before it is counted.
            "Accept-Encoding": "identity",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    # -- streaming -------------------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        content = msgspec.json.encode(self.build_body(request))
        async with AsyncExitStack() as stack:
            client = self._client
            if client is None:
                client = await stack.enter_async_context(httpx.AsyncClient())
            response = await self._send(client, content)
            stack.push_async_callback(response.aclose)
            if response.status_code >= 400:
                raise await self._status_error(response)
            # aclosing: if our consumer stops early, the response must close now, not at GC.
            async with aclosing(self._read_events(response)) as chunks:
                async for chunk in chunks:
                    yield chunk

    async def _send(self, client: httpx.AsyncClient, content: bytes) -> httpx.Response:
        # httpx's own read timeout is off: the idle and header deadlines here give precise
        # messages, and an injected client's timeouts must not override ours.
        timeout = httpx.Timeout(
            connect=self.connect_timeout_s, read=None, write=self.timeout_s, pool=self.timeout_s
        )
        http_request = client.build_request(
            "POST", self._url, content=content, headers=self._headers(), timeout=timeout
        )
        try:
            with anyio.fail_after(self.timeout_s):
                return await client.send(http_request, stream=True)
        except TimeoutError:
            raise ProviderError(
                f"model server at {self._origin} did not respond within {_secs(self.timeout_s)}",
                retryable=True,
            ) from None
        except httpx.ConnectTimeout:
            raise ProviderError(
                f"timed out connecting to model server at {self._origin}", retryable=True
            ) from None
        except httpx.ConnectError:
            raise ProviderError(
                f"could not connect to model server at {self._origin}", retryable=True
            ) from None
        except httpx.HTTPError:
            raise ProviderError(
                f"request to model server at {self._origin} failed", retryable=True
            ) from None

    async def _read_events(self, response: httpx.Response) -> AsyncIterator[ModelChunk]:
        decoder = SSEDecoder()
        received = 0
        finish: str | None = None
        usage: UsageChunk | None = None
        done = False
        async with aclosing(response.aiter_bytes()) as body:
            while not done:
                try:
                    with anyio.fail_after(self.idle_timeout_s):
                        raw = await anext(body, None)
                except (TimeoutError, httpx.HTTPError) as exc:
                    if finish is not None:
                        # The answer is complete; only the [DONE] trailer is missing.
                        break
                    if isinstance(exc, TimeoutError):
                        raise ProviderError(
                            f"model stream stalled for {_secs(self.idle_timeout_s)}",
                            retryable=True,
                        ) from None
                    raise ProviderError("model stream ended unexpectedly", retryable=True) from None
                if raw is None:
                    events = decoder.close()
                else:
                    received += len(raw)
                    if received > self.max_response_bytes:
                        raise ProviderError(
                            f"model response exceeded {self.max_response_bytes} bytes"
                        )
                    events = decoder.feed(raw)
                for data in events:
                    data = data.strip()
                    if not data:
                        continue
                    if data == b"[DONE]":
                        done = True
                        break
                    try:
                        chunk = _chunk_decoder.decode(data)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        raise ProviderError("model server sent a malformed stream chunk") from None
                    if chunk.error is not None:
                        raise _stream_error(chunk.error, self._api_key)
                    if chunk.usage is not None:
                        usage = _usage(chunk.usage)
                    for choice in chunk.choices or ():
                        # n > 1 is never requested; other choices are not ours to merge.
                        if choice.index != 0:
                            continue
                        if choice.delta is not None:
                            for out in _delta_chunks(choice.delta):
                                yield out
                        if choice.finish_reason:
                            finish = choice.finish_reason
                if raw is None:
                    break
        if not done and finish is None:
            raise ProviderError("model stream ended unexpectedly", retryable=True)
        if usage is not None:
            yield usage
        if finish is not None:
            yield FinishChunk(finish)

    async def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500
        detail = None
        body = bytearray()
        try:
            with anyio.fail_after(self.idle_timeout_s):
                async for raw in response.aiter_bytes():
                    body += raw
                    if len(body) > _MAX_ERROR_BODY_BYTES:
                        body.clear()
                        break
        except (TimeoutError, httpx.HTTPError):
            body.clear()
        if body:
            try:
                parsed = _error_decoder.decode(bytes(body))
            except (msgspec.DecodeError, msgspec.ValidationError):
                parsed = None
            if parsed is not None:
                raw_message = (
                    parsed.error.message
                    if isinstance(parsed.error, _ErrorBody)
                    else parsed.error or parsed.message
                )
                detail = _sanitise(raw_message, self._api_key)
        message = f"model server returned HTTP {status}"
        if detail:
            message += f": {detail}"
        return ProviderError(message, retryable=retryable, status=status)


# --- conversions ----------------------------------------------------------------------------


def _message_to_wire(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
        wire["content"] = message.content
        return wire
    if message.role == "assistant" and message.tool_calls:
        # The API's own shape for a tool-calling turn with no text is ``content: null``.
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": msgspec.json.encode(call.arguments).decode(),
                },
            }
            for call in message.tool_calls
        ]
    else:
        wire["content"] = message.content
    if message.name:
        wire["name"] = message.name
    return wire


def _tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def _delta_chunks(delta: _Delta) -> Iterator[ModelChunk]:
    # Servers disagree on the field name; some send both with the same text.
    reasoning = delta.reasoning_content or delta.reasoning
    if reasoning:
        yield ReasoningChunk(reasoning)
    if delta.content:
        yield TextChunk(delta.content)
    for position, call in enumerate(delta.tool_calls or ()):
        function = call.function or _Function()
        arguments = function.arguments
        if isinstance(arguments, dict):
            arguments = msgspec.json.encode(arguments).decode()
        yield ToolCallChunk(
            # A missing index only happens on servers that send each call whole, in order.
            index=call.index if call.index is not None else position,
            id=call.id,
            name=function.name,
            arguments=arguments or "",
        )


def _usage(usage: _Usage) -> UsageChunk:
    details = usage.completion_tokens_details
    return UsageChunk(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        reasoning_tokens=details.reasoning_tokens if details is not None else None,
    )


def _stream_error(error: _ErrorBody | str, api_key: str | None) -> ProviderError:
    raw = error.message if isinstance(error, _ErrorBody) else error
    code = error.code if isinstance(error, _ErrorBody) else None
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    retryable = status is None or status in _RETRYABLE_STATUS or status >= 500
    detail = _sanitise(raw, api_key)
    message = "model server reported an error mid-stream"
    if detail:
        message += f": {detail}"
    return ProviderError(message, retryable=retryable, status=status)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _sanitise(value: Any, api_key: str | None) -> str | None:
    """A server's error message cut down to one short printable line, never echoing our key."""
    if not isinstance(value, str):
        return None
    text = " ".join(_CONTROL.sub(" ", value).split())
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "[redacted]")
    if len(text) > _MAX_ERROR_MESSAGE_CHARS:
        text = text[: _MAX_ERROR_MESSAGE_CHARS - 1].rstrip() + "…"
    return text or None


def _secs(value: float) -> str:
    return f"{value:g} s"
