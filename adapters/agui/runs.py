"""What a RunAgentInput asks for, shared by the HTTP and WebSocket bindings: a new run, the
continuation of a run that waited for a tool approval, or watching an existing run."""

from __future__ import annotations

import json
from typing import Any, NamedTuple, cast

from ...contracts.client_errors import ClientError
from ...contracts.gateway_events import DECISIONS
from ...contracts.history import answer_call, suspended_call
from ...contracts.limits import EndpointLimits
from ...contracts.messages import Message, ToolCall
from ...contracts.ports import MultitaskStrategy, RunInfo, RunNotFound, RunService, StartRun
from ...contracts.projector import ProjectorContext
from ..shared.multitask import start_on_thread
from ..shared.problem import HttpProblem
from ..shared.projector import SEEN_CALLS, SeenCall, seen_calls
from .input import (
    ResumeEntry,
    RunAgentInput,
    attach_cursor,
    client_tools,
    multitask_strategy,
    received_count,
    to_history,
    webhook_url,
)
from .interrupts import InterruptRef, parse_interrupt_id

ASKABLE = DECISIONS[:4]
# A start's bounds where none are given (a test's, or a binding without the gateway's): no
# webhooks (no outbox), the default wait for a thread's turn.
NO_LIMITS = EndpointLimits()


class RunPlan(NamedTuple):
    info: RunInfo
    context: ProjectorContext
    after: int  # the stream carries the run's events after this seq
    # The request drives the run (it started or continued it): unless detached, a client that
    # disconnects cancels it. A client that only watches never does.
    drives: bool
    # The first events of this stream the client already has (forwardedProps.loopgate.received):
    # the stream is projected whole, as deterministic as ever, and these are not sent again.
    received: int = 0


async def plan_run(
    service: RunService,
    body: RunAgentInput,
    traceparent: str | None,
    tracestate: str | None = None,
    *,
    agent: str | None = None,
    limits: EndpointLimits = NO_LIMITS,
) -> RunPlan:
    """``agent``: the one a new run goes to (None: the thread's, else the default); a request
    that continues or watches a run follows that run, whichever agent has it."""
    try:
        after = attach_cursor(body)
        received = received_count(body)
        strategy = multitask_strategy(body)
        webhook = webhook_url(body)
    except ClientError as exc:
        raise HttpProblem(422, exc.message) from None
    refs = [(entry, parse_interrupt_id(entry.interrupt_id)) for entry in body.resume or []]
    approvals = [
        (entry, ref) for entry, ref in refs if ref is not None and ref.kind == "permission"
    ]
    if approvals:
        if len(approvals) != len(refs) or after is not None:
            raise HttpProblem(
                422, "resume: answer tool approvals in a request of their own (no other resume)"
            )
        plan = await continue_after_approvals(service, body, approvals)
        return plan._replace(received=received or 0)
    if after is not None:
        if body.resume:
            raise HttpProblem(422, "an attaching request takes no resume")
        info = await service.get(body.run_id)
        # A watcher that names a cursor had the stream up to it: its tool calls are known.
        seen = seen_calls(await service.history(info.id, limit=after)) if after else None
        context = projector_context(info, body, seen)
        return RunPlan(info, context, after, drives=False, received=received or 0)
    if received is not None:
        raise HttpProblem(
            422,
            "forwardedProps.loopgate.received: this request starts a new run, there is no "
            "stream to resume; resume with forwardedProps.loopgate.attach (or by answering the "
            "same tool approvals again)",
        )
    info, context = await start_run(
        service,
        body,
        traceparent,
        tracestate,
        agent=agent,
        strategy=strategy,
        webhook=webhook,
        limits=limits,
    )
    return RunPlan(info, context, 0, drives=True)


def projector_context(
    info: RunInfo, body: RunAgentInput, seen: dict[str, SeenCall] | None = None
) -> ProjectorContext:
    """``seen``: the tool calls of the stream this one continues (the client knows them)."""
    metadata = info.metadata
    # Only the run's own trace (telemetry on), not a caller's traceparent echoed back.
    options: dict[str, Any] = (
        {k: metadata[k] for k in ("trace_id", "traceparent") if k in metadata}
        if "trace_id" in metadata
        else {}
    )
    if seen:
        options[SEEN_CALLS] = seen
    return ProjectorContext(
        run_id=info.id,
        thread_id=info.thread_id,
        protocol_version=body.protocol_version,
        options=options,
    )


async def continue_after_approvals(
    service: RunService, body: RunAgentInput, approvals: list[tuple[ResumeEntry, InterruptRef]]
) -> RunPlan:
    """Answer the run's approval questions, then follow it on from the first of them."""
    run_ids = {ref.run_id for _, ref in approvals}
    if len(run_ids) > 1:
        raise HttpProblem(422, "resume: answer the approvals of one run per request")
    run_id = run_ids.pop()
    try:
        events = await service.history(run_id)
    except RunNotFound:
        raise HttpProblem(
            422, f"resume: unknown interruptId {approvals[0][0].interrupt_id!r}"
        ) from None
    asked = {e.data.get("requestId"): e.seq for e in events if e.kind == "permission_request"}
    seqs: list[int] = []
    for entry, ref in approvals:
        seq = asked.get(ref.key)
        if seq is None:
            raise HttpProblem(422, f"resume: {entry.interrupt_id!r} is not an open interrupt")
        seqs.append(seq)
        # An approval already decided (another client, the timeout) is not an error: the
        # stream shows what was decided.
        await service.respond(run_id, ref.key, decision_of(entry))
    info = await service.get(run_id)
    after = min(seqs)
    # The client had the stream up to its first question: the calls started there are known
    # to it, and their results are no orphans.
    seen = seen_calls(e for e in events if e.seq <= after)
    return RunPlan(info, projector_context(info, body, seen), after, drives=True)


def decision_of(entry: ResumeEntry) -> str:
    """An approval's answer: ``{"decision": "allow_once"}``, a decision string, or a boolean
    (``{"approved": true}`` too); a cancelled interrupt rejects the call once."""
    if entry.status == "cancelled":
        return "reject_once"
    payload: Any = entry.payload
    if isinstance(payload, dict):
        answer = cast(dict[str, Any], payload)
        payload = answer.get("decision", answer.get("approved"))
    if isinstance(payload, bool):
        return "allow_once" if payload else "reject_once"
    if isinstance(payload, str) and payload in ASKABLE:
        return payload
    raise HttpProblem(
        422,
        f'resume: the payload for {entry.interrupt_id!r} must be {{"decision": one of '
        f"{', '.join(ASKABLE)}}}",
    )


async def start_run(
    service: RunService,
    body: RunAgentInput,
    traceparent: str | None,
    tracestate: str | None = None,
    *,
    agent: str | None = None,
    strategy: MultitaskStrategy | None = None,
    webhook: str | None = None,
    limits: EndpointLimits = NO_LIMITS,
) -> tuple[RunInfo, ProjectorContext]:
    history = to_history(body)
    for entry in body.resume or []:
        await apply_resume(service, entry.interrupt_id, entry.status, entry.payload, history)
    metadata: dict[str, Any] = {"protocol": "agui"}
    if body.parent_run_id:
        metadata["parentRunId"] = body.parent_run_id
    request = StartRun(
        input=history,
        run_id=body.run_id,
        thread_id=body.thread_id,
        client_tools=client_tools(body),
        metadata=metadata,
        traceparent=traceparent,
        tracestate=tracestate,
        agent=agent,
        multitask_strategy=strategy,
        webhook=webhook,
    )
    # The client sends the whole conversation: nothing of the thread's is added to it.
    info = await start_on_thread(service, request, limits)
    return info, projector_context(info, body)


async def apply_resume(
    service: RunService, interrupt_id: str, status: str, payload: Any, history: list[Message]
) -> None:
    """Put the answer to an interrupt into ``history`` as the suspended tool call's result.

    The interrupt id names the run and its terminal event (adapters/agui/interrupts.py), so the
    suspended call is found in that run's journal. The result the suspending tool reported
    (its question) is replaced: the answer is the call's real result.
    """
    ref = parse_interrupt_id(interrupt_id)
    if ref is None or ref.kind != "interrupt":
        raise HttpProblem(422, f"resume: unknown interruptId {interrupt_id!r}")
    try:
        events = await service.history(ref.run_id)
    except RunNotFound:
        raise HttpProblem(422, f"resume: unknown interruptId {interrupt_id!r}") from None
    seq = int(ref.key)
    terminal = events[seq - 1] if 0 < seq <= len(events) else None
    if terminal is None or terminal.data.get("status") != "waiting_user":
        raise HttpProblem(422, f"resume: {interrupt_id!r} is not an open interrupt")
    answer = (
        (payload if isinstance(payload, str) else json.dumps(payload))
        if status == "resolved"
        else "The user cancelled this request."
    )
    call_id = suspended_call(terminal.data, ref.position)
    if call_id is None:
        history.append(Message(role="user", content=answer))
        return
    # The client's history may not carry the suspended call: the journal's is put in then.
    start = next(
        (e for e in events if e.kind == "tool_call_start" and e.data.get("id") == call_id),
        None,
    )
    call = (
        ToolCall(
            id=call_id,
            name=str(start.data.get("name")),
            arguments=start.data.get("arguments") or {},
        )
        if start is not None
        else None
    )
    answer_call(history, call_id, answer, call)
