"""What each tool does with runs, through the ``RunService`` port; results as MCP's
``CallToolResult`` bodies (camelCase, as on the wire).

``run`` starts a run and follows it from its journal with :class:`McpProjector`: progress
items go to the caller as they come, the answer is the result. A call that goes away before
its run ends (the client cancelled it, or hung up) cancels the run: nobody would read its
answer. A refusal (a bad thread, too many runs, an unreachable gateway) is a tool error in our
words; anything else is logged and is a tool error that says only that.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import msgspec

from ...contracts.client_errors import client_message
from ...contracts.envelope import Envelope
from ...contracts.limits import EndpointLimits
from ...contracts.parts import Content
from ...contracts.ports import (
    RunExists,
    RunInfo,
    RunService,
    ServiceUnavailable,
    StartRun,
)
from ...contracts.projector import ProjectorContext
from ..shared.follow import RESUMING, EventStream
from ..shared.multitask import start_on_thread
from ..shared.threads import ThreadBusy
from .projector import Answer, McpItem, McpProjector, Progress, result_body
from .resources import events_uri
from .tools import ListArgs, RunArgs, RunIdArgs, prompt_content

log = logging.getLogger("loopgate.mcp")

SendProgress = Callable[[Progress], Awaitable[None]]
# Returns once the client has handled the notifications sent to it so far (or cannot say).
Delivered = Callable[[], Awaitable[None]]
CONSUMER = "mcp"
# How long a call that went away waits for its run's cancel to be taken.
CANCEL_TIMEOUT_S = 5.0
INTERNAL = "the tool failed with an internal error; the gateway's log has the details"
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


class Trace(msgspec.Struct, frozen=True):
    """A caller's W3C trace context: the call's ``_meta``, else the HTTP request's headers."""

    traceparent: str | None = None
    tracestate: str | None = None


NO_TRACE = Trace()


def trace_of(*sources: Mapping[str, Any] | None) -> Trace:
    """The first source with a well-formed ``traceparent`` (and its ``tracestate``)."""
    for source in sources:
        if not source:
            continue
        parent = source.get("traceparent")
        if isinstance(parent, str) and _TRACEPARENT.fullmatch(parent.strip().lower()):
            state = source.get("tracestate")
            return Trace(parent.strip().lower(), state if isinstance(state, str) else None)
    return NO_TRACE


def text_result(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def data_result(data: dict[str, Any]) -> dict[str, Any]:
    """Structured output, with its JSON as text for clients that read only content."""
    text = msgspec.json.encode(data).decode()
    return {"content": [{"type": "text", "text": text}], "structuredContent": data}


def refusal(exc: Exception) -> str | None:
    """Our words for a refusal of the run service, or None when the exception is not one."""
    if isinstance(exc, ThreadBusy):
        return exc.detail
    if isinstance(exc, ServiceUnavailable):
        return exc.detail
    return client_message(exc)


def describe(info: RunInfo) -> dict[str, Any]:
    """A run as get_run and list_runs show it: the gateway's record and its event log."""
    body: dict[str, Any] = msgspec.to_builtins(info)
    body["events"] = events_uri(info.id)
    return body


class _CallStream(EventStream[McpItem, list[Envelope]]):
    """A ``run`` call's run: its progress to the caller as it comes, its answer kept for the
    result. Resumed after a cut-off: the result must come whatever the client's pace."""

    def __init__(
        self,
        service: RunService,
        run_id: str,
        projector: McpProjector,
        progress: SendProgress | None,
    ) -> None:
        super().__init__(service, run_id, projector, RESUMING, consumer=CONSUMER)
        self.progress = progress
        self.answers: list[Answer] = []

    async def send(self, messages: list[McpItem]) -> None:
        for item in messages:
            if isinstance(item, Answer):
                self.answers.append(item)
            elif self.progress is not None:
                await self.progress(item)


class Calls:
    """The tools over one run service (shared by every connection of a server)."""

    def __init__(self, service: RunService, limits: EndpointLimits) -> None:
        self.service = service
        self.limits = limits  # the gateway's: how long a start waits for its thread's turn

    async def run(
        self,
        args: RunArgs,
        progress: SendProgress | None,
        *,
        trace: Trace = NO_TRACE,
        metadata: dict[str, Any] | None = None,
        run_id: str | None = None,
        delivered: Delivered | None = None,
        agent: str | None = None,
        tell_agent: bool = False,
        webhook: str | None = None,
    ) -> dict[str, Any]:
        """``delivered`` is awaited between the last progress notification and the result:
        clients that handle a response at once and a notification a tick later (the
        TypeScript SDK) would otherwise drop the progress that reached them with it.
        ``agent``: the agent to run (None: the thread's, else the default); ``tell_agent``:
        the result's ``_meta.loopgate`` names the agent that ran (a gateway with several)."""
        request = StartRun(
            input=args.prompt,
            thread_id=args.thread_id,
            run_id=run_id,
            metadata=metadata or {},
            traceparent=trace.traceparent,
            tracestate=trace.tracestate,
            agent=agent,
            multitask_strategy=args.multitask_strategy,
            webhook=webhook,
        )
        info = await self._start(request, prompt_content(args))
        projector = McpProjector(ProjectorContext(run_id=info.id, thread_id=info.thread_id))
        answer = await self._follow(info.id, projector, progress)
        if progress is not None and delivered is not None:
            await delivered()
        body = result_body(answer)
        if tell_agent and info.agent is not None:
            body["_meta"]["loopgate"] = {**body["_meta"]["loopgate"], "agent": info.agent}
        return body

    async def _start(self, request: StartRun, content: Content) -> RunInfo:
        # Shielded: a call cancelled while its run starts is cancelled once it has the run,
        # in _follow, which then cancels the run too (a wait for the thread's turn included:
        # it is bounded by thread_wait_s).
        with anyio.CancelScope(shield=True):
            try:
                return await start_on_thread(self.service, request, self.limits, content)
            except RunExists:
                # A client that reuses a request id in its session (which the protocol
                # forbids) still gets its run, one a cancellation cannot name.
                request = msgspec.structs.replace(request, run_id=None)
                return await start_on_thread(self.service, request, self.limits, content)
        # Type checkers see that a cancel scope may swallow an exception; one nobody cancels
        # swallows none, so this line is never reached.
        raise AssertionError("a shielded start neither returned nor raised")

    async def _follow(
        self, run_id: str, projector: McpProjector, progress: SendProgress | None
    ) -> Answer:
        stream = _CallStream(self.service, run_id, projector, progress)
        followed = False
        try:
            await stream.run()
            followed = True
        finally:
            if not followed:
                await self._abandon(run_id)
        answers = stream.answers
        if not answers:  # the hub ends every run with a terminal event; this is belt and braces
            answers.extend(i for i in projector.close("truncated") if isinstance(i, Answer))
        return answers[0] if answers else Answer("The run ended without a final answer.", True, {})

    async def _abandon(self, run_id: str) -> None:
        """The caller went away mid-run: stop the run it started."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_S):
            try:
                await self.service.cancel(run_id)
            except Exception:
                log.warning("could not cancel run %s after its MCP call went away", run_id)

    async def get_run(self, args: RunIdArgs) -> dict[str, Any]:
        return data_result(describe(await self.service.get(args.run_id, attachments=True)))

    async def list_runs(self, args: ListArgs) -> dict[str, Any]:
        runs = await self.service.list_runs(limit=args.limit, thread_id=args.thread_id)
        return data_result({"runs": [describe(info) for info in runs]})

    async def cancel_run(self, args: RunIdArgs) -> dict[str, Any]:
        # Cancelling a finished run is a no-op (accepted: false), not an error.
        result = await self.service.cancel(args.run_id)
        return data_result(msgspec.to_builtins(result))
