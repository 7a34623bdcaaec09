"""Attachments from the Python clients (the openai SDK, the acp SDK, the mcp SDK, plain HTTP
for the native API) to a plugged loop that hashes what it gets, and to the reference loop on a
fake OpenAI-compatible server; bounds, mislabelled bytes and a text-only loop refused with
each protocol's own error."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from acp import (
    PROTOCOL_VERSION,
    RequestError,
    connect_to_agent,
    image_block,
    resource_block,
    text_block,
)
from acp.schema import BlobResourceContents
from acp.ws import create_websocket_stream
from mcp import types as mcp_types
from openai import OpenAI

from loopgate.gateway.agents.spec import AgentSpec
from tests.acp.support import RecordingClient
from tests.attachments.support import (
    NOTES,
    NOTES_B64,
    PDF_B64,
    PNG,
    PNG_B64,
    answer_text,
    notes_line,
    png_line,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.gateway.harness import running_gateway
from tests.mcp.support import http_session

LOOPS = "tests.attachments.loops"
PNG_URL = f"data:image/png;base64,{PNG_B64}"


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeOpenAI, str]]:
    model_server = FakeOpenAI()
    with serve_app(model_server.app) as base:
        yield model_server, base


@pytest.fixture(scope="module")
def gateway(fake: tuple[FakeOpenAI, str]) -> Iterator[str]:
    """The default agent hashes what it gets; ``plain`` takes text only; ``vision`` and
    ``blind`` are the reference loop on the fake model server, ``blind``'s declared text-only."""
    _, model_base = fake
    on_fake = {"openai_base_url": f"{model_base}/v1", "openai_model": "text"}
    agents = {
        "plain": AgentSpec(loop=f"{LOOPS}:text_loop"),
        "vision": AgentSpec(**on_fake),
        "blind": AgentSpec(**on_fake, openai_text_only=True),
    }
    with running_gateway(
        loop=f"{LOOPS}:loop",
        agents=agents,
        max_body_bytes=256 << 10,
        max_attachment_bytes=64 << 10,
        max_message_attachment_bytes=100 << 10,
    ) as (base, _):
        yield base


@pytest.fixture
def client(gateway: str) -> OpenAI:
    return OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0)


def ask(client: OpenAI, content: Any, model: str = "default") -> str:
    answer = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}]
    )
    return answer.choices[0].message.content or ""


IMAGE_AND_NOTES: list[Any] = [
    {"type": "text", "text": "what is in these?"},
    {"type": "image_url", "image_url": {"url": PNG_URL}},
    {
        "type": "file",
        "file": {"file_data": f"data:text/plain;base64,{NOTES_B64}", "filename": "notes.txt"},
    },
]


def test_openai_sdk_image_and_text_file_reach_the_loop_intact(client: OpenAI) -> None:
    said = ask(client, IMAGE_AND_NOTES)
    assert said.splitlines() == [
        png_line(),
        notes_line(),
        "text: what is in these?",
        "earlier attachments: 0",
    ]


def test_openai_sdk_image_by_url_is_passed_on_not_fetched(client: OpenAI) -> None:
    # Nothing listens there: a gateway that fetched would fail the run.
    url = "http://127.0.0.1:9/never-fetched.png"
    said = ask(
        client, [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]
    )
    assert said.splitlines()[0] == f"image {url}"


def test_openai_sdk_mislabelled_image_is_a_400_naming_it(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        ask(
            client,
            [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PDF_B64}"}}],
        )
    message = refused.value.body["message"]  # type: ignore[index]
    assert "part 1" in message and "labelled image/png" in message and "application/pdf" in message


def test_openai_sdk_oversized_image_is_a_400_naming_the_bound(client: OpenAI) -> None:
    big = PNG + b"\0" * (70 << 10)
    url = f"data:image/png;base64,{base64.b64encode(big).decode()}"
    with pytest.raises(openai.BadRequestError) as refused:
        ask(client, [{"type": "image_url", "image_url": {"url": url}}])
    assert f"over {64 << 10} bytes" in refused.value.body["message"]  # type: ignore[index]


def test_openai_sdk_a_message_over_its_bound_is_refused(client: OpenAI) -> None:
    each = base64.b64encode(PNG + b"\0" * (60 << 10)).decode()
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{each}"}}
    with pytest.raises(openai.BadRequestError) as refused:
        ask(client, [image, image])
    assert f"attachments are over {100 << 10} bytes" in refused.value.body["message"]  # type: ignore[index]


def test_a_text_only_loop_refuses_an_image_naming_the_kind(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        ask(client, IMAGE_AND_NOTES, model="plain")
    message = refused.value.body["message"]  # type: ignore[index]
    assert "does not take image parts" in message and "(it takes text)" in message
    # Text alone still goes through, as before attachments.
    assert ask(client, "hello", model="plain") == "you said: hello"


def test_native_api_continued_thread_keeps_its_attachments(gateway: str) -> None:
    image = {"type": "image", "media_type": "image/png", "data": PNG_B64, "name": "dot.png"}
    first = httpx.post(
        f"{gateway}/v1/runs",
        json={"input": [{"role": "user", "content": [{"type": "text", "text": "see"}, image]}]},
    ).json()
    answer_text(gateway, first["id"])  # read whole: the run is over
    kept = httpx.get(f"{gateway}/v1/runs/{first['id']}").json()["input"][0]["content"]
    assert kept[1] == image  # kept as sent: the thread's next run gets it again
    second = httpx.post(
        f"{gateway}/v1/runs", json={"input": "and now?", "thread_id": first["thread_id"]}
    ).json()
    assert "earlier attachments: 1" in answer_text(gateway, second["id"])


@pytest.mark.anyio
async def test_acp_sdk_image_and_file_blocks_reach_the_loop_and_come_back_on_load(
    gateway: str,
) -> None:
    client = RecordingClient()
    url = gateway.replace("http://", "ws://") + "/acp"
    conn = connect_to_agent(client, await create_websocket_stream(url), observers=[client.observe])
    notes = BlobResourceContents(
        uri="file:///tmp/notes.txt", blob=NOTES_B64, mime_type="text/plain"
    )
    try:
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert init.agent_capabilities.prompt_capabilities.image is True
        session = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        prompt = [
            text_block("what is this?"),
            image_block(PNG_B64, "image/png"),
            resource_block(notes),
        ]
        answer = await conn.prompt(session_id=session, prompt=prompt)
    finally:
        await conn.close()
    assert answer.stop_reason == "end_turn"
    assert client.text().splitlines()[:2] == [png_line(), notes_line()]

    loaded = RecordingClient()
    conn = connect_to_agent(loaded, await create_websocket_stream(url), observers=[loaded.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        await conn.load_session(cwd="/tmp", session_id=session, mcp_servers=[])
    finally:
        await conn.close()
    echoed = [u.content for _, u in loaded.updates if u.session_update == "user_message_chunk"]
    assert [c.type for c in echoed] == ["text", "image", "resource"]
    assert echoed[1].data == PNG_B64 and echoed[1].mime_type == "image/png"
    assert echoed[2].resource.blob == NOTES_B64
    loaded.check_all_updates()


@pytest.mark.anyio
async def test_acp_sdk_image_to_a_text_only_agent_is_invalid_params(gateway: str) -> None:
    client = RecordingClient()
    url = gateway.replace("http://", "ws://") + "/acp"
    conn = connect_to_agent(client, await create_websocket_stream(url), observers=[client.observe])
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        await conn.set_config_option(config_id="agent", session_id=session, value="plain")
        with pytest.raises(RequestError) as refused:
            await conn.prompt(
                session_id=session, prompt=[text_block("see"), image_block(PNG_B64, "image/png")]
            )
    finally:
        await conn.close()
    assert refused.value.code == -32602
    assert "does not take image parts" in str(refused.value)


@pytest.mark.anyio
async def test_mcp_sdk_run_with_an_image_attachment(gateway: str) -> None:
    async with http_session(f"{gateway}/mcp") as session:
        result = await session.call_tool(
            "run",
            {
                "prompt": "what is this?",
                "attachments": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}],
                "agent": "default",
            },
        )
    assert not result.is_error
    [block] = result.content
    assert isinstance(block, mcp_types.TextContent)
    assert block.text.splitlines()[0] == png_line()


def test_reference_loop_sends_the_image_as_image_url(
    client: OpenAI, fake: tuple[FakeOpenAI, str]
) -> None:
    model_server, _ = fake
    model_server.clear()
    ask(client, IMAGE_AND_NOTES, model="vision")
    sent = model_server.requests[0].body["messages"][-1]["content"]
    assert sent[0] == {"type": "text", "text": "what is in these?"}
    assert sent[1] == {"type": "image_url", "image_url": {"url": PNG_URL}}
    # A text file goes inline, as text.
    assert sent[2]["type"] == "text" and NOTES.decode() in sent[2]["text"]


def test_a_text_only_model_gets_placeholders_and_the_client_is_told(
    client: OpenAI, fake: tuple[FakeOpenAI, str], gateway: str
) -> None:
    model_server, _ = fake
    model_server.clear()
    raw = client.chat.completions.with_raw_response.create(
        model="blind", messages=[{"role": "user", "content": IMAGE_AND_NOTES}]
    )
    sent = model_server.requests[0].body["messages"][-1]["content"]
    assert sent[1] == {"type": "text", "text": f"[image (image/png, {len(PNG)} bytes)]"}
    assert NOTES.decode() in sent[2]["text"]
    events = httpx.get(f"{gateway}/v1/runs/{raw.headers['x-request-id']}/events").text
    assert f'"attachmentsAsText":["[image (image/png, {len(PNG)} bytes)]"]' in events


def test_jsonrpc_run_start_takes_parts_and_refuses_a_kind_with_invalid_params(
    gateway: str,
) -> None:
    image = {"type": "image", "media_type": "image/png", "data": PNG_B64}
    messages = [{"role": "user", "content": [{"type": "text", "text": "see"}, image]}]

    def start(agent: str) -> dict[str, Any]:
        call = {"jsonrpc": "2.0", "id": 1, "method": "run.start"}
        params = {"input": messages, "agent": agent}
        answer: dict[str, Any] = httpx.post(
            f"{gateway}/rpc", json={**call, "params": params}
        ).json()
        return answer

    started = start("default")["result"]
    assert answer_text(gateway, started["runId"]).splitlines()[0] == png_line()
    refused = start("plain")["error"]
    assert refused["code"] == -32602
    assert "does not take image parts" in refused["data"]["detail"]
