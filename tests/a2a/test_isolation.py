"""A2A tasks are isolated by the caller's identity (API keys), as every run is: another
caller's task is not found (the same answer as a task that never was), is not listed, cannot
be cancelled, subscribed to or configured; the Agent Card is open and says to send a bearer
credential; a request without one is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotFoundError

from tests.gateway.harness import running_gateway
from tests.identity import principals

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, principals.TestKey]]]:
    folder: Path = tmp_path_factory.mktemp("identity")
    keys = principals.write_test_keys(folder / "keys.json")
    with running_gateway(keys_file=str(folder / "keys.json"), scripted_delay_s=0.002) as (
        base,
        _,
    ):
        yield base, keys


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def clients(
    world: tuple[str, dict[str, principals.TestKey]], binding: str
) -> AsyncIterator[dict[str, Client]]:
    base, keys = world
    made: dict[str, Client] = {}
    async with (
        httpx.AsyncClient(timeout=30, headers=keys["alice"].headers) as alice,
        httpx.AsyncClient(timeout=30, headers=keys["bob"].headers) as bob,
    ):
        for name, http in (("alice", alice), ("bob", bob)):
            config = ClientConfig(
                httpx_client=http, supported_protocol_bindings=[binding], streaming=False
            )
            made[name] = await create_client(base, client_config=config)
        yield made


def send(text: str) -> pb.SendMessageRequest:
    msg = pb.Message(message_id=str(uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)])
    return pb.SendMessageRequest(message=msg)


async def test_someone_elses_task_is_not_found(clients: dict[str, Client]) -> None:
    alice, bob = clients["alice"], clients["bob"]
    [item] = [i async for i in alice.send_message(send("plain say hello"))]
    task_id = item.task.id
    assert (await alice.get_task(pb.GetTaskRequest(id=task_id))).id == task_id
    calls: list[Any] = [
        bob.get_task(pb.GetTaskRequest(id=task_id)),
        bob.cancel_task(pb.CancelTaskRequest(id=task_id)),
        bob.create_task_push_notification_config(
            pb.TaskPushNotificationConfig(task_id=task_id, url="http://127.0.0.1:9/hook")
        ),
    ]
    for call in calls:
        with pytest.raises(TaskNotFoundError) as caught:
            await call
        assert task_id in str(caught.value)
    listed = await bob.list_tasks(pb.ListTasksRequest())
    assert task_id not in [t.id for t in listed.tasks]
    answering = send("B")
    answering.message.task_id = task_id
    with pytest.raises(TaskNotFoundError):
        [_ async for _ in bob.send_message(answering)]


async def test_the_card_is_open_and_the_rest_is_not(
    world: tuple[str, dict[str, principals.TestKey]],
) -> None:
    base, _ = world
    async with httpx.AsyncClient(timeout=30) as http:
        card = await http.get(f"{base}/.well-known/agent-card.json")
        named = await http.get(f"{base}/agents/default/.well-known/agent-card.json")
        refused = await http.post(f"{base}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
    assert card.status_code == 200 and named.status_code == 200
    assert card.json()["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
    assert refused.status_code == 401
