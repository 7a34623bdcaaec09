"""The official ``a2a-sdk`` client (Python) against a real gateway, over both bindings: card
discovery, send, stream, get, list, cancel, resubscribe after a dropped stream, and
input-required answered (an ``ask_user`` question, a tool approval)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.01, keepalive_s=0.2)]
BINDINGS = ["JSONRPC", "HTTP+JSON"]
TIMEOUT = 30.0


@pytest.fixture(params=BINDINGS)
async def client(gateway: str, request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=[request.param])
        yield await create_client(gateway, client_config=config)


def message(text: str, **ids: str) -> pb.SendMessageRequest:
    parts = [pb.Part(text=text)]
    msg = pb.Message(message_id=str(uuid4()), role=pb.ROLE_USER, parts=parts, **ids)
    return pb.SendMessageRequest(message=msg)


async def collect(stream: AsyncIterator[pb.StreamResponse]) -> list[dict[str, Any]]:
    return [MessageToDict(item) async for item in stream]


def answer_text(task: pb.Task) -> str:
    return "".join(part.text for a in task.artifacts if a.name == "answer" for part in a.parts)


async def test_card_names_both_bindings(gateway: str) -> None:
    async with httpx.AsyncClient() as http:
        card = (await http.get(f"{gateway}/.well-known/agent-card.json")).json()
    bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert bindings == {"JSONRPC": f"{gateway}/a2a", "HTTP+JSON": f"{gateway}/a2a/rest"}
    assert card["capabilities"]["streaming"] is True
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}


async def test_send_waits_for_the_answer(client: Client) -> None:
    client._config.streaming = False  # one answer (SendMessage), not a stream
    [item] = [i async for i in client.send_message(message("plain say hello"))]
    task = item.task
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert "hello" in answer_text(task).lower()
    got = await client.get_task(pb.GetTaskRequest(id=task.id))
    assert got.status.state == pb.TASK_STATE_COMPLETED
    assert answer_text(got) == answer_text(task)
    assert got.history[0].parts[0].text == "plain say hello"
    listed = await client.list_tasks(pb.ListTasksRequest(context_id=task.context_id))
    assert [t.id for t in listed.tasks] == [task.id]


async def test_stream_is_a_task_then_updates_then_one_terminal_status(client: Client) -> None:
    items = await collect(client.send_message(message("one tool: what is 17 * 23")))
    assert "task" in items[0]
    assert items[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    states = [i["statusUpdate"]["status"]["state"] for i in items if "statusUpdate" in i]
    terminal = [s for s in states if s != "TASK_STATE_WORKING"]
    assert terminal == ["TASK_STATE_COMPLETED"]
    assert states[-1] == "TASK_STATE_COMPLETED"
    calls = [
        part["data"]
        for i in items
        if "statusUpdate" in i and "message" in i["statusUpdate"]["status"]
        for part in i["statusUpdate"]["status"]["message"]["parts"]
        if "data" in part
    ]
    assert "toolCall" in calls[0] and "toolResult" in calls[1]
    chunks = [i["artifactUpdate"] for i in items if "artifactUpdate" in i]
    last_id = chunks[-1]["artifact"]["artifactId"]
    answer = [c for c in chunks if c["artifact"]["artifactId"] == last_id]
    assert answer[0]["artifact"]["name"] == "answer" and not answer[0].get("append")
    assert all(c.get("append") for c in answer[1:])
    assert [c.get("lastChunk", False) for c in answer][-2:] == [False, True]


async def test_input_required_is_answered_on_the_same_task(client: Client) -> None:
    items = await collect(client.send_message(message("ask user plan my trip")))
    last = items[-1]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    question = last["status"]["message"]["parts"][0]["text"]
    assert "A or B" in question
    task_id, context_id = last["taskId"], last["contextId"]
    items = await collect(client.send_message(message("B", task_id=task_id, context_id=context_id)))
    ends = [i["statusUpdate"] for i in items if "statusUpdate" in i]
    assert {e["taskId"] for e in ends} == {task_id}
    assert ends[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
    task = await client.get_task(pb.GetTaskRequest(id=task_id))
    assert task.status.state == pb.TASK_STATE_COMPLETED
    assert [m.parts[0].text for m in task.history if m.role == pb.ROLE_USER] == [
        "ask user plan my trip",
        "B",
    ]


async def test_a_tool_approval_is_answered_by_a_message(client: Client) -> None:
    items = await collect(client.send_message(message("write note")))
    last = items[-1]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    parts = last["status"]["message"]["parts"]
    assert any("permissionRequest" in p.get("data", {}) for p in parts)
    task_id = last["taskId"]
    items = await collect(client.send_message(message("allow_once", task_id=task_id)))
    states = [i["statusUpdate"]["status"]["state"] for i in items if "statusUpdate" in i]
    assert states[-1] == "TASK_STATE_COMPLETED"
    results = [
        p["data"]["toolResult"]
        for i in items
        if "statusUpdate" in i and "message" in i["statusUpdate"]["status"]
        for p in i["statusUpdate"]["status"]["message"]["parts"]
        if "toolResult" in p.get("data", {})
    ]
    assert results and results[0]["failed"] is False


async def test_cancel_then_cancel_again(client: Client) -> None:
    stream = client.send_message(message("slow tool"))
    first = await anext(stream)
    task_id = first.task.id
    await stream.aclose()  # a dropped stream leaves the task working
    task = await client.get_task(pb.GetTaskRequest(id=task_id))
    assert task.status.state == pb.TASK_STATE_WORKING
    canceled = await client.cancel_task(pb.CancelTaskRequest(id=task_id))
    assert canceled.status.state == pb.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(pb.CancelTaskRequest(id=task_id))


async def test_resubscribe_after_a_dropped_stream(client: Client) -> None:
    stream = client.send_message(message("one tool: what is 6 * 7"))
    first = await anext(stream)
    await stream.aclose()
    items = await collect(client.subscribe(pb.SubscribeToTaskRequest(id=first.task.id)))
    assert items[0]["task"]["id"] == first.task.id  # the task from its start, from the journal
    assert items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    with pytest.raises(UnsupportedOperationError):
        await collect(client.subscribe(pb.SubscribeToTaskRequest(id=first.task.id)))


async def test_an_unknown_task_is_not_found(client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task(pb.GetTaskRequest(id="no-such-task"))
