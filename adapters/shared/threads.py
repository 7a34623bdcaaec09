"""Threads continued from the journal: a run on a thread that has runs starts from the
conversation so far, so a client sends only what is new.

The rule for the native HTTP API and JSON-RPC: a prompt *string* on a ``thread_id`` that has
runs continues that thread (the latest run's input, then what it said and did, then the new
input; after an ``ask_user`` the input is that call's answer). A message *list* is the whole
conversation, as sent, so clients that keep their own history (AG-UI, ``loopgate acp
--server``, any existing one) are unaffected. ACP sessions are threads and follow the same
rule for every prompt.

The busy check is a look-up, then a claim: such a start is ``exclusive``, and the run service
claims the thread for the run (atomically, across instances sharing a journal), so of two
prompts on one thread at the same instant one starts and the other is refused ThreadBusy, as
if it had come second. (ACP sessions keep their own check: one prompt at a time per session.)

Cost: one ``list_runs(limit=1)`` and one read of the latest run's events per continued start.
The history is bounded by the journal's own retention: a thread whose runs were all dropped
starts afresh.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from ...contracts.blobs import refs_in
from ...contracts.history import Conversation, continued, conversation_after
from ...contracts.messages import Message
from ...contracts.parts import Content
from ...contracts.ports import RunInfo, RunService, StartRun, ThreadBusy

__all__ = [
    "ThreadBusy",
    "conversation_after_run",
    "latest_run",
    "thread_start",
    "with_attachments",
]


async def latest_run(
    service: RunService, thread_id: str, skip: Collection[str] = ()
) -> RunInfo | None:
    """The thread's newest run (of those not in ``skip``: runs rolled back) once it has
    finished; None for a thread with no runs.

    Raises ThreadBusy while that run is still going.
    """
    runs = await service.list_runs(limit=len(skip) + 1, thread_id=thread_id)
    runs = [run for run in runs if run.id not in skip]
    if not runs:
        return None
    if runs[0].state != "finished":
        raise ThreadBusy(thread_id, runs[0].id)
    return runs[0]


async def conversation_after_run(service: RunService, run: RunInfo) -> Conversation:
    """The conversation once ``run`` is over: its input (the thread up to it), then its events
    as messages. One read of the run's events."""
    run = await with_attachments(service, run)
    return conversation_after(run.input, await service.history(run.id))


async def with_attachments(service: RunService, run: RunInfo) -> RunInfo:
    """``run`` as ``list_runs`` gives it (attachments by reference, contracts/blobs.py) with
    its input's bytes inline, as ``get`` gives it; unchanged when it has no attachment."""
    return await service.get(run.id, attachments=True) if refs_in(run.input) else run


async def thread_start(
    service: RunService,
    request: StartRun,
    content: Content | None = None,
    skip: Collection[str] = (),
) -> StartRun:
    """``request`` as it is to be started: a prompt on a thread that has runs becomes the
    thread's conversation with that prompt (or answer) added (the runs in ``skip`` left out);
    anything else is unchanged. ``content``: the prompt with its attachments, in place of the
    prompt string.

    Raises ThreadBusy when the thread's latest run is still going.
    """
    prompt = request.input
    if content is not None and not isinstance(content, str):
        request = msgspec.structs.replace(request, input=[Message(role="user", content=content)])
    if (
        request.source != "loop"
        or request.thread_id is None
        or not isinstance(prompt, str)
        or not prompt
    ):
        return request
    run = await latest_run(service, request.thread_id, skip)
    if run is None:
        return msgspec.structs.replace(request, exclusive=True)
    conversation = await conversation_after_run(service, run)
    asked = prompt if content is None else content
    return msgspec.structs.replace(request, input=continued(conversation, asked), exclusive=True)
