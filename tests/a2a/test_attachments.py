"""A2A file parts through the official ``a2a-sdk`` client: raw bytes and URLs reach the loop as
attachments (docs/attachments.md); a mislabelled file, and a kind the agent does not take, are
refused in A2A's own errors."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from uuid import uuid4

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError

from tests.gateway.harness import running_gateway

pytestmark = [pytest.mark.anyio]
TIMEOUT = 30.0
# A 1×1 PNG: the signature the gateway checks a part labelled image/png against.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def client_for(http: httpx.AsyncClient, base: str, binding: str) -> Client:
    config = ClientConfig(httpx_client=http, supported_protocol_bindings=[binding], streaming=False)
    return await create_client(base, client_config=config)


def message(*parts: pb.Part) -> pb.SendMessageRequest:
    msg = pb.Message(message_id=str(uuid4()), role=pb.ROLE_USER, parts=list(parts))
    return pb.SendMessageRequest(message=msg)


@pytest.fixture
def gateway_with_images() -> AsyncIterator[str]:
    with running_gateway(scripted_delay_s=0) as (base, _):
        yield base


async def test_a_file_part_reaches_the_loop_intact(gateway_with_images: str, binding: str) -> None:
    base = gateway_with_images
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        client = await client_for(http, base, binding)
        sent = message(
            pb.Part(text="plain what is in this picture?"),
            pb.Part(raw=PNG, media_type="image/png", filename="dot.png"),
            pb.Part(url="https://example.com/report.pdf", media_type="application/pdf"),
        )
        [item] = [i async for i in client.send_message(sent)]
        task = item.task
        assert task.status.state == pb.TASK_STATE_COMPLETED
        run = (await http.get(f"{base}/v1/runs/{task.id}")).json()
    [prompt] = [m for m in run["input"] if m["role"] == "user"]
    text, image, pdf = prompt["content"]
    assert text == {"type": "text", "text": "plain what is in this picture?"}
    assert image["type"] == "image" and image["media_type"] == "image/png"
    assert image["name"] == "dot.png" and image["size"] == len(PNG)
    assert hashlib.sha256(base64.b64decode(image["data"])).digest() == hashlib.sha256(PNG).digest()
    # A URL is passed on, never fetched by the gateway.
    assert pdf == {
        "type": "file",
        "media_type": "application/pdf",
        "url": "https://example.com/report.pdf",
    }


async def test_a_mislabelled_file_is_refused(gateway_with_images: str, binding: str) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        client = await client_for(http, gateway_with_images, binding)
        sent = message(pb.Part(text="look"), pb.Part(raw=b"not a picture", media_type="image/png"))
        with pytest.raises(InvalidParamsError, match="image/png"):
            [i async for i in client.send_message(sent)]


async def test_a_kind_the_agent_does_not_take_is_content_type_not_supported(binding: str) -> None:
    with running_gateway(scripted_delay_s=0, accepts=["file"]) as (base, _):
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            client = await client_for(http, base, binding)
            sent = message(pb.Part(text="look"), pb.Part(raw=PNG, media_type="image/png"))
            with pytest.raises(ContentTypeNotSupportedError, match="does not take image parts"):
                [i async for i in client.send_message(sent)]
            card = (await http.get(f"{base}/.well-known/agent-card.json")).json()
    assert "image/*" in card["defaultInputModes"]
