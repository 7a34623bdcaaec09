"""The A2A operations, one function each, shared by both bindings: what a call does with the
run service and what it answers (a Task, a page of tasks, or a stream of items)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec

from ...contracts.envelope import Envelope
from ...contracts.gateway_events import PERMISSION_REQUEST
from ...contracts.ports import RunService
from ..shared.follow import FollowPolicy
from ..shared.problem import HttpProblem
from ..shared.stream import ResponseStream, StreamResponse
from .errors import A2AError, translate
from .projector import A2AProjector, state_of
from .tasks import Turn, projector_for, snapshot, task_of, task_runs
from .wire import INPUT_REQUIRED, TERMINAL_STATES, Item, ListParams, SendParams, Task, TaskStatus

CONSUMER = "a2a"
# A non-streaming SendMessage answers once the task stops (ends, or waits for input), or
# after this long with the task as it is then (the client polls GetTask, or subscribes).
BLOCKING_WAIT_S = 60.0
# CancelTask answers once the run has ended, or after this long (still working then).
CANCEL_WAIT_S = 10.0
MAX_PAGE = 100


Start = Callable[[SendParams, "str | None"], Awaitable[Turn]]


async def send_message(
    start: Start, service: RunService, params: SendParams, agent: str | None
) -> Task:
    """``start`` (the endpoint's: it also sets the message's push config) then, unless the
    client asked to return at once, the task once it stops or ``BLOCKING_WAIT_S`` passed."""
    turn = await start(params, agent)
    configuration = params.configuration
    history_length = configuration.history_length if configuration else None
    if configuration is None or not configuration.return_immediately:
        await _settle(service, turn.info.id, turn.after, BLOCKING_WAIT_S)
    task, _ = await snapshot(service, turn.task_id, history_length)
    return task


async def _settle(
    service: RunService, run_id: str, after: int, wait_s: float, *, approvals: bool = True
) -> None:
    """Until the run ends or (``approvals``) asks for an approval, at most ``wait_s``."""
    with anyio.move_on_after(wait_s):
        async with service.subscribe(run_id, after=after, consumer=CONSUMER) as subscription:
            while not subscription.done:
                batch = await subscription.next_batch(wait_s)
                if approvals and any(e.kind == PERMISSION_REQUEST for e in batch):
                    return


async def get_task(service: RunService, task_id: str, history_length: int | None) -> Task:
    task, _ = await snapshot(service, task_id, history_length)
    return task


async def cancel_task(service: RunService, task_id: str) -> Task:
    runs = await task_runs(service, task_id)
    latest = runs[-1]
    if latest.state != "running":
        raise A2AError.not_cancelable(
            f"task {task_id!r} is not working ({state_of(latest.status)}): nothing to cancel"
        )
    await service.cancel(latest.id)
    await _settle(service, latest.id, latest.last_seq, CANCEL_WAIT_S, approvals=False)
    task, _ = await snapshot(service, task_id)
    return task


async def list_tasks(service: RunService, params: ListParams) -> dict[str, Any]:
    """The caller's tasks, newest first (their state from their latest run; no artifacts)."""
    size = params.page_size or 50
    if not 1 <= size <= MAX_PAGE:
        raise A2AError.invalid_params(f"pageSize must be 1…{MAX_PAGE}")
    if params.page_token:
        raise A2AError.invalid_params("pageToken: this server returns one page")
    runs = await service.list_runs(limit=MAX_PAGE * 2, thread_id=params.context_id or None)
    latest: dict[str, Any] = {}
    order: list[str] = []
    for run in runs:  # newest first: a task's first sighting is its latest turn
        task_id = task_of(run)
        if task_id not in latest:
            latest[task_id] = run
            order.append(task_id)
    tasks: list[Task] = []
    for task_id in order:
        run = latest[task_id]
        state = state_of(run.status) if run.state == "finished" else _running_state(run)
        if params.status and params.status != state:
            continue
        tasks.append(Task(id=task_id, context_id=run.thread_id, status=TaskStatus(state=state)))
        if len(tasks) == size:
            break
    return {"tasks": tasks, "nextPageToken": "", "pageSize": size, "totalSize": len(tasks)}


def _running_state(run: Any) -> Any:
    return INPUT_REQUIRED if run.awaiting == "approval" else "TASK_STATE_WORKING"


# --- streams -------------------------------------------------------------------------------


class TaskStream(ResponseStream[Item, list[Envelope]]):
    """One run of a task as stream items, until the task ends or waits for input."""

    def __init__(
        self,
        service: RunService,
        run_id: str,
        projector: A2AProjector,
        policy: FollowPolicy,
        encode: Callable[[list[Item]], bytes],
        *,
        after: int = 0,
        start: bool = True,
    ) -> None:
        super().__init__(
            service, run_id, projector, policy, consumer=CONSUMER, after=after, start=start
        )
        self._encode = encode
        self._stopped = False

    def project(self, batch: list[Envelope]) -> list[Item]:
        items = super().project(batch)
        for item in items:
            status = getattr(item, "status", None)
            if isinstance(status, TaskStatus) and (
                status.state == INPUT_REQUIRED or status.state in TERMINAL_STATES
            ):
                self._stopped = True
        return items

    def finished(self) -> bool:
        return self._stopped

    def encode(self, messages: list[Item]) -> bytes:
        return self._encode(messages)


async def stream_turn(
    service: RunService,
    turn: Turn,
    policy: FollowPolicy,
    encode: Callable[[list[Item]], bytes],
    refuse: Callable[[HttpProblem], Any],
) -> StreamResponse:
    """The turn's run from its start, or, for an approval answered, after it (the projector
    first reads what came before, so its open parts stay open)."""
    projector = projector_for(turn.info, turn.task_id)
    start = turn.after == 0
    if not start:
        projector.start()
        for envelope in await service.history(turn.info.id):
            if envelope.seq > turn.after:
                break
            projector.feed(envelope)
    stream = TaskStream(
        service, turn.info.id, projector, policy, encode, after=turn.after, start=start
    )
    return stream.response(refuse=refuse, headers={"x-loopgate-run-id": turn.info.id})


async def subscribe_turn(service: RunService, task_id: str) -> Turn:
    runs = await task_runs(service, task_id)
    latest = runs[-1]
    if latest.state != "running":
        raise A2AError.unsupported(
            f"task {task_id!r} is not working ({state_of(latest.status)}): GetTask has it"
        )
    return Turn(info=latest, task_id=task_id)


def problem_error(problem: HttpProblem) -> A2AError:
    return translate(problem) or A2AError.internal()


def builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
