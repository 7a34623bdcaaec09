"""Tasks over the run service: a task is a run, continued by the runs that answer it.

A message without ``taskId`` starts a run, and the run's id is the task's. A message on a task
waiting for input (``INPUT_REQUIRED``) answers it: a pending tool approval gets the decision
(the same run goes on), a turn that ended waiting on the user gets a run of its own on the
same thread, marked with the task's id (``TASK`` in its metadata). ``contextId`` is the thread.
Every look-up goes through the run service, which checks the caller's ownership: another
caller's task is not found.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ...contracts import parts as content
from ...contracts.envelope import Envelope
from ...contracts.events import PermissionRequestView, view_of
from ...contracts.gateway_events import DECISIONS, PERMISSION_REQUEST, PERMISSION_RESULT
from ...contracts.parts import Content
from ...contracts.ports import RunInfo, RunNotFound, RunService, StartRun
from ...contracts.projector import ProjectorContext
from ..shared.threads import thread_start
from .errors import A2AError
from .projector import CONTINUED, TASK_ID, A2AProjector, state_of
from .wire import (
    INPUT_REQUIRED,
    TERMINAL_STATES,
    WORKING,
    ArtifactUpdate,
    Item,
    Message,
    Part,
    StatusUpdate,
    Task,
    TaskStatus,
)

PROTOCOL = "a2a"
# Run metadata: the task a run is a turn of (absent on a task's first run), and the client's
# message that started it (the task's history).
TASK = "a2aTask"
SENT = "a2aMessage"
# How many runs of a thread are searched for a task's turns.
TURNS_SEARCHED = 100
# Words a text answer to a tool approval may be, besides the decisions themselves.
_DECISION_WORDS = {
    "yes": "allow_once",
    "allow": "allow_once",
    "approve": "allow_once",
    "no": "reject_once",
    "deny": "reject_once",
    "reject": "reject_once",
}
_json = msgspec.json.Encoder()


def task_of(info: RunInfo) -> str:
    named = info.metadata.get(TASK)
    return named if isinstance(named, str) else info.id


def message_input(parts: list[Part]) -> Content:
    """What the loop is given for a message's parts: text as text, data parts as JSON text,
    file parts (``raw`` bytes or a ``url``) as attachments (contracts.parts, checked at the
    run's start like every front end's). The one place A2A content becomes the loop's input."""
    out: list[content.Part] = []
    for index, part in enumerate(parts):
        if isinstance(part.text, str):
            out.append(content.TextPart(text=part.text))
        elif part.data is not msgspec.UNSET:
            out.append(content.TextPart(text=_json.encode(part.data).decode()))
        elif isinstance(part.raw, str) or isinstance(part.url, str):
            media_type = part.media_type if isinstance(part.media_type, str) else None
            out.append(
                content.media(
                    _media_kind(media_type),
                    media_type=media_type,
                    data=part.raw if isinstance(part.raw, str) else None,
                    url=part.url if isinstance(part.url, str) else None,
                    name=part.filename if isinstance(part.filename, str) else None,
                )
            )
        else:
            raise A2AError.invalid_params(
                f"message.parts[{index}]: a part carries text, data, raw bytes or a url"
            )
    if not content.attachments(out) and not prompt_of(out).strip():
        raise A2AError.invalid_params("message.parts: the message has no text")
    return content.content_of(out)


def prompt_of(given: Content | list[content.Part]) -> str:
    """The message's own words (its text parts), which continue a thread."""
    if isinstance(given, str):
        return given
    return "\n".join(p.text for p in given if isinstance(p, content.TextPart))


def _media_kind(media_type: str | None) -> Literal["image", "audio", "file"]:
    top = (media_type or "").split("/", 1)[0]
    return "image" if top == "image" else "audio" if top == "audio" else "file"


def decision_of(parts: list[Part]) -> str:
    """A tool approval's answer: a data part ``{"decision": …}`` or a text naming one."""
    for part in parts:
        if isinstance(part.data, dict):
            given = part.data.get("decision")
            if given in DECISIONS:
                return str(given)
        if isinstance(part.text, str):
            word = part.text.strip().lower()
            if word in DECISIONS:
                return word
            if word in _DECISION_WORDS:
                return _DECISION_WORDS[word]
    raise A2AError.invalid_params(
        'the task waits for a tool approval: answer with a data part {"decision": …} or a '
        f"text, one of {', '.join(DECISIONS)} (or yes/no)"
    )


async def task_runs(service: RunService, task_id: str) -> list[RunInfo]:
    """The task's runs, oldest first. TaskNotFound for a run that is a later turn's."""
    try:
        first = await service.get(task_id)
    except RunNotFound:
        raise A2AError.task_not_found(task_id) from None
    if task_of(first) != first.id:
        raise A2AError.task_not_found(task_id)
    runs = await service.list_runs(limit=TURNS_SEARCHED, thread_id=first.thread_id)
    turns = [run for run in runs if run.id != first.id and run.metadata.get(TASK) == task_id]
    return [first, *reversed(turns)]


def projector_for(info: RunInfo, task_id: str) -> A2AProjector:
    options: dict[str, Any] = {TASK_ID: task_id}
    if info.id != task_id:
        options[CONTINUED] = True
    return A2AProjector(ProjectorContext(run_id=info.id, thread_id=info.thread_id, options=options))


class Folded(msgspec.Struct, kw_only=True):
    """A task as its items so far make it."""

    task: Task

    def add(self, item: Item) -> None:
        task = self.task
        if type(item) is StatusUpdate:
            task.status = item.status
        elif type(item) is ArtifactUpdate:
            for index, artifact in enumerate(task.artifacts):
                if artifact.artifact_id == item.artifact.artifact_id:
                    if item.append:
                        artifact.parts.extend(item.artifact.parts)
                    else:
                        task.artifacts[index] = item.artifact
                    break
            else:
                copy = msgspec.structs.replace(item.artifact, parts=list(item.artifact.parts))
                task.artifacts.append(copy)


def sent_message(info: RunInfo) -> Message | None:
    raw = info.metadata.get(SENT)
    if not isinstance(raw, dict):
        return None
    try:
        return msgspec.convert(raw, Message)
    except msgspec.ValidationError:
        return None


async def snapshot(
    service: RunService, task_id: str, history_length: int | None = None
) -> tuple[Task, list[RunInfo]]:
    """The task now: its runs' events through the projector, folded."""
    runs = await task_runs(service, task_id)
    first = runs[0]
    folded = Folded(
        task=Task(id=task_id, context_id=first.thread_id, status=TaskStatus(state=WORKING))
    )
    history: list[Message] = []
    for run in runs:
        message = sent_message(run)
        if message is not None:
            history.append(message)
        projector = projector_for(run, task_id)
        items = list(projector.start())
        for envelope in await service.history(run.id):
            items.extend(projector.feed(envelope))
        for item in items:
            folded.add(item)
        status_message = folded.task.status.message
        if status_message is not msgspec.UNSET and folded.task.status.state != WORKING:
            history.append(status_message)
    task = folded.task
    task.metadata = {"loopgate": {"runs": [run.id for run in runs]}}
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task.history = history
    return task, runs


def pending_request(envelopes: list[Envelope]) -> str | None:
    """The id of the run's permission request that has no result yet."""
    answered: set[str] = set()
    for envelope in reversed(envelopes):
        if envelope.kind == PERMISSION_RESULT:
            rid = envelope.data.get("requestId")
            if isinstance(rid, str):
                answered.add(rid)
        elif envelope.kind == PERMISSION_REQUEST:
            rid = view_of(PermissionRequestView, envelope.data).request_id
            if rid is not None and rid not in answered:
                return rid
    return None


class Turn(msgspec.Struct, kw_only=True):
    """The run a message goes on with: ``after`` is where its stream picks up (0: its start)."""

    info: RunInfo
    task_id: str
    after: int = 0


async def send(service: RunService, message: Message, agent: str | None) -> Turn:
    """Start a task, or answer the one ``message.taskId`` names."""
    sent = msgspec.to_builtins(message)
    if not isinstance(message.task_id, str) or not message.task_id:
        given = message_input(message.parts)
        context = message.context_id if isinstance(message.context_id, str) else None
        request = StartRun(
            input=prompt_of(given),
            thread_id=context or None,
            metadata={"protocol": PROTOCOL, SENT: sent},
            agent=agent,
        )
        info = await service.start(await thread_start(service, request, given))
        return Turn(info=info, task_id=info.id)
    task_id = message.task_id
    runs = await task_runs(service, task_id)
    latest = runs[-1]
    if latest.state == "running":
        if latest.awaiting != "approval":
            raise A2AError.unsupported(
                f"task {task_id!r} is working and takes no input now; subscribe to follow it"
            )
        decision = decision_of(message.parts)
        events = await service.history(latest.id)
        request_id = pending_request(events)
        if request_id is None:
            raise A2AError.unsupported(f"task {task_id!r} has no approval waiting")
        await service.respond(latest.id, request_id, decision)
        return Turn(info=latest, task_id=task_id, after=events[-1].seq if events else 0)
    state = state_of(latest.status)
    if state != INPUT_REQUIRED:
        raise A2AError.unsupported(
            f"task {task_id!r} has ended ({state}); send a message without taskId to start "
            "another on its contextId"
        )
    given = message_input(message.parts)
    request = StartRun(
        input=prompt_of(given),
        thread_id=latest.thread_id,
        metadata={"protocol": PROTOCOL, TASK: task_id, SENT: sent},
        agent=latest.agent,
    )
    info = await service.start(await thread_start(service, request, given))
    return Turn(info=info, task_id=task_id)


def is_terminal(task: Task) -> bool:
    return task.status.state in TERMINAL_STATES
