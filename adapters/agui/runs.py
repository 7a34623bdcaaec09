"""Starting a loopgate run from a RunAgentInput, shared by the HTTP and WebSocket bindings."""

from __future__ import annotations

import json
from typing import Any

from adapters.agui.input import RunAgentInput, client_tools, to_history
from adapters.shared.problem import HttpProblem
from contracts.messages import Message, ToolCall
from contracts.ports import RunInfo, RunService, StartRun
from contracts.projector import ProjectorContext

_INTERRUPT = ":interrupt:"


async def start_run(
    service: RunService,
    body: RunAgentInput,
    traceparent: str | None,
    tracestate: str | None = None,
) -> tuple[RunInfo, ProjectorContext]:
    history = to_history(body)
    for entry in body.resume or []:
        await apply_resume(service, entry.interrupt_id, entry.status, entry.payload, history)
    metadata: dict[str, Any] = {"protocol": "agui"}
    if body.parent_run_id:
        metadata["parentRunId"] = body.parent_run_id
    info = await service.start(
        StartRun(
            input=history,
            run_id=body.run_id,
            thread_id=body.thread_id,
            client_tools=client_tools(body),
            metadata=metadata,
            traceparent=traceparent,
            tracestate=tracestate,
        )
    )
    trace = {k: info.metadata[k] for k in ("trace_id", "traceparent") if k in info.metadata}
    context = ProjectorContext(
        run_id=info.id,
        thread_id=info.thread_id,
        protocol_version=body.protocol_version,
        # Only the run's own trace (telemetry on), not a caller's traceparent echoed back.
        options=trace if "trace_id" in trace else {},
    )
    return info, context


async def apply_resume(
    service: RunService, interrupt_id: str, status: str, payload: Any, history: list[Message]
) -> None:
    """Put the answer to an interrupt into ``history`` as the suspended tool call's result.

    Interrupt ids are ``<run id>:interrupt:<seq>`` (the projector makes them from the terminal
    event), so the suspended call is found in that run's journal. The result the suspending
    tool reported (its question) is replaced: the answer is the call's real result.
    """
    run_id, _, seq = interrupt_id.rpartition(_INTERRUPT)
    if not run_id or not seq.isdigit():
        raise HttpProblem(422, f"resume: unknown interruptId {interrupt_id!r}")
    events = await service.history(run_id)
    terminal = events[int(seq) - 1] if 0 < int(seq) <= len(events) else None
    if terminal is None or terminal.data.get("status") != "waiting_user":
        raise HttpProblem(422, f"resume: {interrupt_id!r} is not an open interrupt")
    answer = (
        (payload if isinstance(payload, str) else json.dumps(payload))
        if status == "resolved"
        else "The user cancelled this request."
    )
    call_id = terminal.data.get("toolCallId")
    if not isinstance(call_id, str):
        history.append(Message(role="user", content=answer))
        return
    history[:] = [m for m in history if not (m.role == "tool" and m.tool_call_id == call_id)]
    if not any(c.id == call_id for m in history for c in m.tool_calls):
        # The client's history may not carry the suspended call; the model needs it paired.
        start = next(
            (e for e in events if e.kind == "tool_call_start" and e.data.get("id") == call_id),
            None,
        )
        if start is not None:
            call = ToolCall(
                id=call_id,
                name=str(start.data.get("name")),
                arguments=start.data.get("arguments") or {},
            )
            history.append(Message(role="assistant", tool_calls=[call]))
    history.append(Message(role="tool", content=answer, tool_call_id=call_id))
