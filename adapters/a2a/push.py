"""Push notifications: a client's webhook per task, told of the task's changes.

A config (``TaskPushNotificationConfig``) names a URL, and optionally a ``token`` (sent back as
``X-A2A-Notification-Token``) and ``authentication`` (sent as ``Authorization: SCHEME
CREDENTIALS``). While a task has one, each of its runs is followed by a job of the gateway's
outbox (contracts.webhooks), never by the run: every change of the task's state is posted as a
``StreamResponse`` ``{"statusUpdate": …}``, and when the run stops (ends, or waits for input)
the whole task ``{"task": …}`` with its artifacts. Deliveries are retried with back-off.

Where a client may have the gateway post is the operator's: the ``allowed_outbound`` list; a
gateway without credentials (one user, on loopback) posts only to loopback addresses. Configs
are kept in this process's memory (at most ``MAX_CONFIGS`` per task): they do not outlive it.
"""

from __future__ import annotations

import logging
from uuid import uuid4

import msgspec

from ...contracts.outbound import OutboundPolicy
from ...contracts.ports import CutOff, RunService
from ...contracts.webhooks import Outbox, Webhook
from .errors import A2AError
from .tasks import Turn, projector_for, snapshot, task_runs
from .wire import INPUT_REQUIRED, TERMINAL_STATES, PushConfig, StatusUpdate, Task, stream_item

log = logging.getLogger("loopgate.a2a")
MAX_CONFIGS = 10
MAX_TASKS = 10_000
TOKEN_HEADER = "X-A2A-Notification-Token"
_encode = msgspec.json.Encoder().encode


class PushConfigs:
    """The push configs of one app's tasks, and the jobs that follow their runs."""

    def __init__(self, service: RunService, policy: OutboundPolicy, outbox: Outbox | None) -> None:
        self.service = service
        self.policy = policy
        self.outbox = outbox
        self.configs: dict[str, dict[str, PushConfig]] = {}
        self.followed: set[str] = set()

    def supported(self) -> bool:
        return self.outbox is not None

    def check_url(self, url: str) -> None:
        refusal = self.policy.webhook_refusal(url)
        if refusal is not None:
            raise A2AError.invalid_params(f"url: {refusal}")

    async def create(self, task_id: str, config: PushConfig) -> PushConfig:
        if self.outbox is None:
            raise A2AError.push_not_supported("this gateway sends no push notifications")
        runs = await task_runs(self.service, task_id)  # the caller's task, or not found
        self.check_url(config.url)
        held = self.configs.get(task_id)
        if held is None:
            if len(self.configs) >= MAX_TASKS:
                raise A2AError.unsupported("too many tasks have push configs; try again later")
            held = self.configs[task_id] = {}
        config_id = config.id or uuid4().hex
        if config_id not in held and len(held) >= MAX_CONFIGS:
            raise A2AError.unsupported(f"a task has at most {MAX_CONFIGS} push configs")
        stored = msgspec.structs.replace(config, id=config_id, task_id=task_id)
        held[config_id] = stored
        self.follow(Turn(info=runs[-1], task_id=task_id))
        return stored

    async def get(self, task_id: str, config_id: str) -> PushConfig:
        await task_runs(self.service, task_id)
        found = self.configs.get(task_id, {}).get(config_id)
        if found is None:
            raise A2AError.task_not_found(f"{task_id}/pushNotificationConfigs/{config_id}")
        return found

    async def list(self, task_id: str) -> list[PushConfig]:
        await task_runs(self.service, task_id)
        return list(self.configs.get(task_id, {}).values())

    async def delete(self, task_id: str, config_id: str) -> None:
        await task_runs(self.service, task_id)
        held = self.configs.get(task_id, {})
        held.pop(config_id, None)
        if not held:
            self.configs.pop(task_id, None)

    def follow(self, turn: Turn) -> None:
        """Follow ``turn``'s run for the task's webhooks (once per run; none without one)."""
        run_id = turn.info.id
        if (
            self.outbox is None
            or not self.configs.get(turn.task_id)
            or turn.info.state != "running"
            or run_id in self.followed
        ):
            return
        self.followed.add(run_id)

        async def job() -> None:
            try:
                await self._follow(turn)
            finally:
                self.followed.discard(run_id)

        if not self.outbox.start_soon(job):
            self.followed.discard(run_id)
            log.warning("push notifications of task %s not followed: too many jobs", turn.task_id)

    async def _follow(self, turn: Turn) -> None:
        projector = projector_for(turn.info, turn.task_id)
        state: str | None = None
        after, items = turn.after, list(projector.start())
        if after:  # an approval answered: what came before is the projector's, not news
            items = []
            for envelope in await self.service.history(turn.info.id):
                if envelope.seq > after:
                    break
                projector.feed(envelope)
        done = False
        while not done:
            try:
                async with self.service.subscribe(turn.info.id, after=after) as subscription:
                    while not done:
                        for envelope in await subscription.next_batch():
                            items.extend(projector.feed(envelope))
                            after = envelope.seq
                        for item in items:
                            if type(item) is StatusUpdate and item.status.state != state:
                                state = item.status.state
                                await self._post(turn.task_id, item)
                                if state == INPUT_REQUIRED or state in TERMINAL_STATES:
                                    done = True
                        items = []
                        done = done or subscription.done
            except CutOff as cut:
                after = cut.cursor
        task, _ = await snapshot(self.service, turn.task_id)
        await self._post(turn.task_id, task)

    async def _post(self, task_id: str, item: StatusUpdate | Task) -> None:
        assert self.outbox is not None
        body = _encode(stream_item(item))
        for config in list(self.configs.get(task_id, {}).values()):
            headers: dict[str, str] = {}
            if isinstance(config.token, str) and config.token:
                headers[TOKEN_HEADER] = config.token
            auth = config.authentication
            if isinstance(auth, dict):
                scheme, credentials = auth.get("scheme"), auth.get("credentials")
                if isinstance(scheme, str) and isinstance(credentials, str) and credentials:
                    headers["Authorization"] = f"{scheme} {credentials}"
            await self.outbox.deliver(Webhook(url=config.url, body=body, headers=headers))
