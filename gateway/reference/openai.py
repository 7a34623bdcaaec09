"""A ModelProvider for OpenAI-compatible ``/chat/completions`` streaming servers.

Works with OpenAI itself and the servers that copy its wire format (vLLM, llama.cpp, Ollama,
LM Studio, DeepSeek, OpenRouter, …). Every failure surfaces as a :class:`ProviderError` whose
message is safe to show to a client: no exception text, no response bodies beyond a short,
sanitised ``error.message`` from the server's JSON error.
"""

from __future__ import annotations

import enum
import math
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AsyncExitStack, aclosing
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import anyio
import httpx
import msgspec

from ...contracts.messages import Message
from .openai_wire import (
    RETRYABLE_STATUS,
    chunk_decoder,
    delta_chunks,
    error_detail,
    message_to_wire,
    stream_error,
    tool_to_wire,
    unread_parts,
    usage_chunk,
)
from .retry import parse_retry_after
from .sse_decoder import SSEDecoder
from .text_tags import TEXT_TOOLS_MODES, TextTagParser, TextToolsMode
from .types import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ProviderError,
    UsageChunk,
    tool_choice_to_wire,
)

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "OpenAIProvider", "SSEDecoder"]

# A long reasoning response is ~100k chunks of ~300 bytes of JSON envelope each, hence 64 MiB.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024

_MAX_ERROR_BODY_BYTES = 64 * 1024


class OpenAIProvider:
    """Streams chat completions from an OpenAI-compatible server.

    Timeouts: ``connect_timeout_s`` bounds the TCP/TLS connect; ``timeout_s`` bounds everything
    up to the response headers (connect, sending the request, the server's time to first byte);
    ``idle_timeout_s`` bounds the silence between body bytes once the stream is open. There is
    no total deadline: a healthy stream may legitimately run for many minutes.

    Pass ``client`` to share a connection pool; the provider never closes a client it was given.
    Without one, each ``stream()`` call uses (and closes) its own client, so a provider is safe
    to use from several event loops.

    ``text_tools``: whether ``<think>`` and ``<tool_call>`` written into the content (models
    served without a reasoning or tool parser) become reasoning and tool calls
    (:mod:`~loopgate.gateway.reference.text_tags`): ``"auto"`` where a reply uses them, ``"on"``
    also for replies that open inside a think block only ``</think>`` closes (DeepSeek-R1
    distills, QwQ), ``"off"`` never.

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
        text_tools: TextToolsMode = "auto",
        text_only: bool = False,
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
        if text_tools not in TEXT_TOOLS_MODES:
            raise ValueError(f"text_tools must be one of {', '.join(TEXT_TOOLS_MODES)}")
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_response_bytes = max_response_bytes
        self.text_tools: TextToolsMode = text_tools
        # The model reads text only: attachments go to it as placeholders (openai_wire).
        self.text_only = text_only
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
        text_tools = setting("LOOPGATE_OPENAI_TEXT_TOOLS")
        if text_tools is not None:
            kwargs.setdefault("text_tools", text_tools)
        return cls(base_url, model, api_key, **kwargs)

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self._origin!r}, model={self.model!r})"

    # -- request ---------------------------------------------------------------------------

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent to ``/chat/completions`` for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [message_to_wire(m, self.text_only) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [tool_to_wire(t) for t in request.tools]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.tool_choice is not None:
            body["tool_choice"] = tool_choice_to_wire(request.tool_choice)
        if request.response_format is not None:
            body["response_format"] = request.response_format
        return body

    def unread_attachments(self, messages: list[Message]) -> list[str]:
        """The attachments this model gets only as placeholders (ReadsAttachments)."""
        return unread_parts(messages, self.text_only)

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

    async def _read_events(self, response: httpx.Response) -> AsyncGenerator[ModelChunk, None]:
        tags = None if self.text_tools == "off" else TextTagParser(self.text_tools)
        body_reader = _BodyReader(self.max_response_bytes, self._api_key, tags)
        # httpx types it as an iterator; it is an async generator, closed here as soon as we stop.
        chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
        async with aclosing(chunks) as body:
            while not body_reader.done:
                raw = await self._next_bytes(body, body_reader.finish)
                if raw is _End.ANSWERED:
                    break
                for data in body_reader.feed(raw):
                    for chunk in body_reader.parse(data):
                        yield chunk
                    if body_reader.done:
                        break
                if raw is None:
                    break
        for chunk in body_reader.trailer():
            yield chunk

    async def _next_bytes(
        self, body: AsyncIterator[bytes], finish: str | None
    ) -> bytes | Literal[_End.ANSWERED] | None:
        """The next bytes of the body (``None`` at its end) within the idle timeout."""
        try:
            with anyio.fail_after(self.idle_timeout_s):
                return await anext(body, None)
        except (TimeoutError, httpx.HTTPError) as exc:
            if finish is not None:
                # The answer is complete; only the [DONE] trailer is missing.
                return _End.ANSWERED
            if isinstance(exc, TimeoutError):
                raise ProviderError(
                    f"model stream stalled for {_secs(self.idle_timeout_s)}", retryable=True
                ) from None
            raise ProviderError("model stream ended unexpectedly", retryable=True) from None

    async def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        retryable = status in RETRYABLE_STATUS or status >= 500
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
        detail = error_detail(bytes(body), self._api_key) if body else None
        message = f"model server returned HTTP {status}"
        if detail:
            message += f": {detail}"
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        return ProviderError(message, retryable=retryable, status=status, retry_after_s=retry_after)


class _End(enum.Enum):
    ANSWERED = "answered"  # the body stopped after the finish reason: as good as [DONE]


class _BodyReader:
    """One response body as it is read: SSE events in, model chunks out, bounded in size."""

    __slots__ = (
        "_api_key",
        "_decoder",
        "_max_bytes",
        "_received",
        "_tags",
        "done",
        "finish",
        "usage",
    )

    def __init__(self, max_bytes: int, api_key: str | None, tags: TextTagParser | None) -> None:
        self._decoder = SSEDecoder()
        self._tags = tags
        self._max_bytes = max_bytes
        self._api_key = api_key
        self._received = 0
        self.done = False  # [DONE] seen
        self.finish: str | None = None
        self.usage: UsageChunk | None = None

    def feed(self, raw: bytes | None) -> list[bytes]:
        """The events completed by ``raw`` (``None``: the body ended)."""
        if raw is None:
            return self._decoder.close()
        self._received += len(raw)
        if self._received > self._max_bytes:
            raise ProviderError(f"model response exceeded {self._max_bytes} bytes")
        return self._decoder.feed(raw)

    def parse(self, data: bytes) -> list[ModelChunk]:
        """One event's data: the chunks it streams; usage and finish are kept for the trailer."""
        data = data.strip()
        if not data:
            return []
        if data == b"[DONE]":
            self.done = True
            return []
        try:
            chunk = chunk_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ProviderError("model server sent a malformed stream chunk") from None
        if chunk.error is not None:
            raise stream_error(chunk.error, self._api_key)
        if chunk.usage is not None:
            self.usage = usage_chunk(chunk.usage)
        out: list[ModelChunk] = []
        for choice in chunk.choices or ():
            # n > 1 is never requested; other choices are not ours to merge.
            if choice.index != 0:
                continue
            if choice.delta is not None:
                delta_chunks(choice.delta, out, self._tags)
            if choice.finish_reason:
                self.finish = choice.finish_reason
        return out

    def trailer(self) -> list[ModelChunk]:
        """After the body: what the tag parser held back, usage, then the finish reason; a
        body cut short is an error."""
        if not self.done and self.finish is None:
            raise ProviderError("model stream ended unexpectedly", retryable=True)
        out: list[ModelChunk] = []
        if self._tags is not None:
            self._tags.close(out, cut_off=self.finish == "length")
        if self.usage is not None:
            out.append(self.usage)
        if self.finish is not None:
            out.append(FinishChunk(self.finish))
        return out


def _secs(value: float) -> str:
    return f"{value:g} s"
