"""Threads continued from the journal: a run on a thread that has runs starts from the
conversation so far, so a client sends only what is new.

The rule for the native HTTP API and JSON-RPC: a prompt *string* on a ``thread_id`` that has
runs continues that thread (the latest run's input, then what it said and did, then the new
input; after an ``ask_user`` the input is that call's answer). A message *list* is the whole
conversation, as sent, so clients that keep their own history (AG-UI, ``loopgate acp
--server``, any existing one) are unaffected. ACP sessions are threads and follow the same
rule for every prompt.

The busy check is made, not held (no lock spans the history read and the start): two prompts
on one thread at the same instant may both start, each from the same history, as two ACP
connections on one session could before.

Cost: one ``list_runs(limit=1)`` and one read of the latest run's events per continued start.
The history is bounded by the journal's own retention: a thread whose runs were all dropped
starts afresh.
"""

from __future__ import annotations

import msgspec

from loopgate.contracts.history import Conversation, continued, conversation_after
from loopgate.contracts.ports import RunInfo, RunService, StartRun


class ThreadBusy(Exception):
    """The thread's latest run is still going: a run started now would not see its end."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        super().__init__(thread_id)
        self.thread_id = thread_id
        self.run_id = run_id

    @property
    def detail(self) -> str:
        return (
            f"thread {self.thread_id!r} has a run still going ({self.run_id!r}); start the "
            "next one after its terminal completion, or cancel it"
        )


async def latest_run(service: RunService, thread_id: str) -> RunInfo | None:
    """The thread's newest run once it has finished; None for a thread with no runs.

    Raises ThreadBusy while that run is still going.
    """
    runs = await service.list_runs(limit=1, thread_id=thread_id)
    if not runs:
        return None
    if runs[0].state != "finished":
        raise ThreadBusy(thread_id, runs[0].id)
    return runs[0]


async def conversation_after_run(service: RunService, run: RunInfo) -> Conversation:
    """The conversation once ``run`` is over: its input (the thread up to it), then its events
    as messages. One read of the run's events."""
    return conversation_after(run.input, await service.history(run.id))


async def thread_start(service: RunService, request: StartRun) -> StartRun:
    """``request`` as it is to be started: a prompt on a thread that has runs becomes the
    thread's conversation with that prompt (or answer) added; anything else is unchanged.

    Raises ThreadBusy when the thread's latest run is still going.
    """
    prompt = request.input
    if (
        request.source != "loop"
        or request.thread_id is None
        or not isinstance(prompt, str)
        or not prompt
    ):
        return request
    run = await latest_run(service, request.thread_id)
    if run is None:
        return request
    conversation = await conversation_after_run(service, run)
    return msgspec.structs.replace(request, input=continued(conversation, prompt))
