"""What the OpenAI adapter answers before an answer's stream opens, at the ASGI boundary (the
SDK-level refusals, auth and unknown paths, are in test_python_sdk.py and test_node_client.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from loopgate.adapters.openai.errors import refused
from loopgate.adapters.shared.stream import StreamResponse, Write
from loopgate.contracts.ports import LimitReached, Unavailable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("raised", "status", "type_", "code"),
    [
        (
            LimitReached("run r has the maximum of 1 subscribers", 2),
            429,
            "rate_limit_error",
            "rate_limit_exceeded",
        ),
        (Unavailable("the shared journal does not answer", 1), 503, "server_error", None),
    ],
)
async def test_a_stream_refused_before_it_opens_is_openais_error(
    raised: Exception, status: int, type_: str, code: str | None
) -> None:
    async def produce(opened: Callable[[], Awaitable[None]], write: Write) -> None:
        raise raised  # the subscription is refused: nothing was sent yet

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()  # a client that stays: its request was read already
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
    await StreamResponse(produce, refuse=refused)(scope, receive, send)
    start, body = sent[0], sent[1]
    assert start["status"] == status
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"retry-after"]) >= 1
    error = json.loads(body["body"])["error"]
    assert error == {"message": str(raised), "type": type_, "param": None, "code": code}
