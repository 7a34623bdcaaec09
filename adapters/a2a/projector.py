"""LoopEvent envelopes → A2A stream items (``StreamResponse``): the run projector's hooks.

A run is a task's turn::

    task {status: SUBMITTED}                      a new task (a continued one: WORKING)
    statusUpdate WORKING
      artifactUpdate "<segment id>" append … lastChunk   the agent's text, chunk by chunk
      artifactUpdate "<segment id>" (name reasoning)     its reasoning, the same way
      statusUpdate WORKING + data part toolCall / toolResult   each tool call and its answer
      statusUpdate INPUT_REQUIRED + data part permissionRequest   a tool waits for approval
      statusUpdate WORKING {metadata.loopgate}    every other kind (unknown ones too)
    statusUpdate COMPLETED | INPUT_REQUIRED | FAILED | CANCELED   exactly one terminal status

The loop's own events ride in ``metadata.loopgate`` (``kind``, ``seq``, ``data``), so nothing
the stream carries is lost. A turn that ends waiting on the user (``ask_user``, a client
tool) is ``INPUT_REQUIRED`` with the question as the status message: the client's next message
on the same task answers it.
"""

from __future__ import annotations

from typing import Any

from ...contracts.envelope import Envelope
from ...contracts.events import (
    CompletionView,
    PermissionRequestView,
    PermissionResultView,
    view_of,
)
from ...contracts.history import waiting_calls
from ...contracts.projector import ProjectorContext
from ..shared.projector import TEXT, Call, RunProjector, Segment
from .wire import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    SUBMITTED,
    WORKING,
    Artifact,
    ArtifactUpdate,
    Item,
    Message,
    Part,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    timestamp,
)

# ProjectorContext.options keys: the task this run is a turn of (its id: the first run's),
# and whether the task existed before this run (an answer to INPUT_REQUIRED).
TASK_ID = "taskId"
CONTINUED = "continued"
OURS = "loopgate"
REASONING_NAME = "reasoning"
ANSWER_NAME = "answer"

# Terminal completion statuses → task states (others, newer than this code: completed).
_STATES: dict[str, TaskState] = {
    "completed": COMPLETED,
    "budget_exhausted": COMPLETED,
    "waiting_user": INPUT_REQUIRED,
    "failed": FAILED,
    "cancelled": CANCELED,
}


def state_of(status: str | None) -> TaskState:
    """The task state of a run that ended with completion ``status``."""
    return _STATES.get(status or "failed", COMPLETED)


class A2AProjector(RunProjector[Item]):
    """One run as one turn of one task. ``start``/``feed``/``close`` return items; no I/O."""

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        given = context.options.get(TASK_ID)
        self.task_id = given if isinstance(given, str) and given else context.run_id
        self.context_id = context.thread_id
        self._continued = context.options.get(CONTINUED) is True
        self._sent: set[str] = set()  # artifacts that have had a first chunk

    # -- helpers -------------------------------------------------------------------------------

    def _status(
        self,
        state: TaskState,
        envelope: Envelope | None,
        parts: list[Part] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> StatusUpdate:
        status = TaskStatus(state=state)
        if envelope is not None:
            status.timestamp = timestamp(envelope.ts)
        if parts:
            status.message = Message(
                message_id=f"{self.message_prefix}{envelope.seq if envelope else 0}",
                role="ROLE_AGENT",
                parts=parts,
                context_id=self.context_id,
                task_id=self.task_id,
            )
        update = StatusUpdate(task_id=self.task_id, context_id=self.context_id, status=status)
        if metadata is not None:
            update.metadata = {OURS: metadata}
        return update

    def _event(self, envelope: Envelope) -> dict[str, Any]:
        return {"kind": envelope.kind, "seq": envelope.seq, "data": envelope.data}

    # -- hooks: the run's parts ----------------------------------------------------------------

    def on_start(self) -> list[Item]:
        ours = {"runId": self.run_id}
        if self._continued:
            return [self._status(WORKING, None, metadata=ours)]
        task = Task(
            id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=SUBMITTED),
            metadata={OURS: ours},
        )
        return [task, self._status(WORKING, None)]

    def passthrough(self, envelope: Envelope) -> list[Item]:
        return [self._status(WORKING, envelope, metadata=self._event(envelope))]

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[Item]:
        first = segment.id not in self._sent
        artifact = Artifact(artifact_id=segment.id, parts=[Part(text=delta)])
        if first:
            self._sent.add(segment.id)
            artifact.name = ANSWER_NAME if segment.kind == TEXT else REASONING_NAME
        return [
            ArtifactUpdate(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=artifact,
                append=not first,
            )
        ]

    def close_segment(self, segment: Segment) -> list[Item]:
        return [
            ArtifactUpdate(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=Artifact(artifact_id=segment.id),
                append=True,
                last_chunk=True,
            )
        ]

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[Item]:
        data = {"toolCall": {"id": call.id, "name": call.name, "arguments": call.arguments}}
        return [self._status(WORKING, envelope, [Part(data=data)], self._event(envelope))]

    def announce_call(self, call: Call, envelope: Envelope) -> list[Item]:
        return self.on_tool_start(call, envelope)

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[Item]:
        data = envelope.data
        answer: dict[str, Any] = {"id": call.id, "name": call.name, "failed": failed}
        if failed:
            answer["error"] = data.get("error", data.get("resultPreview"))
        else:
            result = data.get("result")
            answer["result"] = data.get("resultPreview") if result is None else result
        parts = [Part(data={"toolResult": answer})]
        return [self._status(WORKING, envelope, parts, self._event(envelope))]

    def on_permission_request(self, view: PermissionRequestView, envelope: Envelope) -> list[Item]:
        call = view.tool_call or {}
        named = call.get("name") if isinstance(call, dict) else None
        name = named if isinstance(named, str) else "a tool"
        question = f"Allow {name} to run? Answer allow_once, allow_always, reject_once or "
        question += "reject_always (or a data part {decision})."
        parts = [Part(text=question), Part(data={"permissionRequest": envelope.data})]
        return [self._status(INPUT_REQUIRED, envelope, parts, self._event(envelope))]

    def on_permission_result(self, view: PermissionResultView, envelope: Envelope) -> list[Item]:
        return [self._status(WORKING, envelope, metadata=self._event(envelope))]

    # -- hooks: the end ------------------------------------------------------------------------

    def on_terminal(self, status: str, envelope: Envelope) -> list[Item]:
        view = view_of(CompletionView, envelope.data)
        state = state_of(status)
        ours: dict[str, Any] = {"status": status}
        if view.reason is not None:
            ours["reason"] = view.reason
        tokens_in, tokens_out = self.usage_totals()
        ours["usage"] = {"inputTokens": tokens_in, "outputTokens": tokens_out}
        parts: list[Part] = []
        if state == INPUT_REQUIRED:
            waiting = waiting_calls(envelope.data)
            if waiting:
                ours["waiting"] = list(waiting)
            question = self.question_asked(view, envelope)
            if question:
                parts.append(Part(text=question))
        elif state == FAILED:
            parts.append(Part(text=view.error or self.last_error or _failure(view.reason)))
        return [self._status(state, envelope, parts, ours)]

    def on_truncated(self, reason: str) -> list[Item]:
        ours = {"status": None, "reason": reason}
        text = f"the run ended without a final answer ({reason})"
        return [self._status(FAILED, self.last, [Part(text=text)], ours)]


def _failure(reason: str | None) -> str:
    return f"the run failed ({reason or 'failed'})"
