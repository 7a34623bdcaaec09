"""Push notifications with the official ``a2a-sdk`` client: a config set, read, listed and
deleted per task; the task's changes posted to a real local webhook server with the client's
token, retried when the webhook fails; a URL off the operator's list refused."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.servers import serve_app
from tests.waiting import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.01)]
TOKEN = "client-token-1"


class Webhook:
    """What a webhook server received; its first POST of each task answers 503."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self.failed: set[str] = set()
        self.lock = threading.Lock()

    async def hook(self, request: Request) -> Response:
        body = json.loads(await request.body())
        task = request.path_params["task"]
        with self.lock:
            if task not in self.failed:
                self.failed.add(task)
                return Response(status_code=503)
            self.received.append((dict(request.headers), body))
        return Response(status_code=204)

    def of(self, task_id: str) -> list[tuple[dict[str, str], Any]]:
        with self.lock:
            return [(h, b) for h, b in self.received if _task_of(b) == task_id]


def _task_of(body: dict[str, Any]) -> str | None:
    if "task" in body:
        return str(body["task"]["id"])
    return str(body.get("statusUpdate", {}).get("taskId"))


@pytest.fixture(scope="module")
def webhook() -> Iterator[tuple[str, Webhook]]:
    hook = Webhook()
    app = Starlette(routes=[Route("/hook/{task}", hook.hook, methods=["POST"])])
    with serve_app(app) as base:
        yield base, hook


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
async def client(gateway: str, request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=[request.param])
        yield await create_client(gateway, client_config=config)


def send(text: str, **config: Any) -> pb.SendMessageRequest:
    msg = pb.Message(message_id=str(uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)])
    return pb.SendMessageRequest(message=msg, configuration=pb.SendMessageConfiguration(**config))


async def test_the_card_offers_push(client: Client, gateway: str) -> None:
    async with httpx.AsyncClient() as http:
        card = (await http.get(f"{gateway}/.well-known/agent-card.json")).json()
    assert card["capabilities"]["pushNotifications"] is True


async def test_changes_are_posted_with_the_token(
    client: Client, webhook: tuple[str, Webhook]
) -> None:
    base, hook = webhook
    stream = client.send_message(send("slow tool", return_immediately=False))
    first = await anext(stream)
    await stream.aclose()
    task_id = first.task.id
    config = pb.TaskPushNotificationConfig(
        task_id=task_id, url=f"{base}/hook/{task_id}", token=TOKEN
    )
    stored = await client.create_task_push_notification_config(config)
    assert stored.id and stored.url == config.url
    got = await client.get_task_push_notification_config(
        pb.GetTaskPushNotificationConfigRequest(task_id=task_id, id=stored.id)
    )
    assert got.token == TOKEN
    listed = await client.list_task_push_notification_configs(
        pb.ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert [c.id for c in listed.configs] == [stored.id]
    await client.cancel_task(pb.CancelTaskRequest(id=task_id))

    def ended() -> list[tuple[dict[str, str], Any]] | None:
        got = hook.of(task_id)
        return got if got and "task" in got[-1][1] else None

    posts = wait_until(ended, 30, "the task's last webhook")
    assert all(h["x-a2a-notification-token"] == TOKEN for h, _ in posts)
    states = [b["statusUpdate"]["status"]["state"] for _, b in posts if "statusUpdate" in b]
    # A state is posted when it changes: WORKING once, the first POST, which the webhook
    # failed (503). It is there: the delivery was retried.
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_CANCELED"]
    assert posts[-1][1]["task"]["status"]["state"] == "TASK_STATE_CANCELED"

    await client.delete_task_push_notification_config(
        pb.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=stored.id)
    )
    listed = await client.list_task_push_notification_configs(
        pb.ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert list(listed.configs) == []


async def test_a_config_sent_with_the_message(client: Client, webhook: tuple[str, Webhook]) -> None:
    base, hook = webhook
    client._config.streaming = False
    context = str(uuid4())
    url = f"{base}/hook/{context}"  # the task's id is not known yet: one hook per test
    config = pb.TaskPushNotificationConfig(url=url, token=TOKEN)
    request = send("plain say hello", task_push_notification_config=config)
    request.message.context_id = context
    [item] = [i async for i in client.send_message(request)]

    def ended() -> list[tuple[dict[str, str], Any]] | None:
        got = hook.of(item.task.id)
        return got if got and "task" in got[-1][1] else None

    posts = wait_until(ended, 30, "the task's last webhook")
    final = posts[-1][1]["task"]
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"
    assert final["artifacts"]


async def test_an_off_host_webhook_is_refused(client: Client) -> None:
    stream = client.send_message(send("plain say hello"))
    first = await anext(stream)
    await stream.aclose()
    config = pb.TaskPushNotificationConfig(
        task_id=first.task.id, url="http://169.254.169.254/latest/meta-data"
    )
    with pytest.raises(InvalidParamsError):
        await client.create_task_push_notification_config(config)


async def test_no_config_for_someone_elses_or_no_task(client: Client) -> None:
    config = pb.TaskPushNotificationConfig(task_id="nope", url="http://127.0.0.1:9/x")
    with pytest.raises(TaskNotFoundError):
        await client.create_task_push_notification_config(config)
