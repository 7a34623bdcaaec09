"""The method table: each method's parameter Struct (so -32602 names the field), its handler,
and what rpc.discover says about it.

Params may be named (an object) or positional (an array, in the Struct's field order). Every
params object may carry ``_meta`` (``{"traceparent": …, "tracestate": …}``), which is taken off
before checking.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, NamedTuple, Protocol

import msgspec

from ...contracts.agents import AgentInfo, UnknownAgent
from ...contracts.client_errors import ClientError
from ...contracts.contract import contract_bytes
from ...contracts.envelope import Envelope, encode_envelope
from ...contracts.gateway_events import Decision
from ...contracts.limits import EndpointLimits
from ...contracts.messages import Message
from ...contracts.ports import CommandResult, MultitaskStrategy, RunInfo, RunService, StartRun
from ...contracts.principal import Owner
from ..shared.multitask import start_on_thread
from ..shared.rpc_errors import (
    INVALID_PARAMS,
    LIMIT_REACHED,
    NOT_ACCEPTED,
    RUN_EXISTS,
    RUN_FINISHED,
    RUN_NOT_FOUND,
    STREAMING_REQUIRED,
    SUBSCRIPTION_NOT_FOUND,
)
from ..shared.threads import ThreadBusy
from .errors import RpcError, invalid_params

RunId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
PageSize = Annotated[int, msgspec.Meta(ge=1, le=1000)]
# A seq: at most what every 64-bit integer (and the SQLite journal) holds.
Cursor = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]
# What a result may add to a response when nothing bounds it (a call outside a batch).
UNBOUNDED = 1 << 62
# run.start's bounds where the gateway gave none (a test's dispatcher): no webhooks.
NO_START_LIMITS = EndpointLimits()


class Streams(Protocol):
    """What a streaming connection (WebSocket, stdio) offers to methods."""

    def check_capacity(self) -> None: ...

    async def subscribe(self, run_id: str, after: int) -> str: ...

    def unsubscribe(self, subscription: str) -> bool: ...


class Trace(NamedTuple):
    """A caller's W3C trace context: from HTTP headers, or a call's ``params._meta``."""

    traceparent: str | None = None
    tracestate: str | None = None


NO_TRACE = Trace()


class CallContext:
    __slots__ = ("limits", "max_result_bytes", "service", "streams", "trace")

    def __init__(
        self,
        service: RunService,
        streams: Streams | None,
        trace: Trace,
        max_result_bytes: int = UNBOUNDED,
        limits: EndpointLimits = NO_START_LIMITS,
    ) -> None:
        self.service = service
        self.streams = streams
        self.trace = trace
        self.limits = limits  # the gateway's, for run.start (a thread's turn, webhooks)
        # The bytes left in this response: methods that page (run.events) stop before them.
        self.max_result_bytes = max_result_bytes

    def need_streams(self, method: str) -> Streams:
        if self.streams is None:
            raise RpcError(
                STREAMING_REQUIRED,
                f"{method} needs a streaming connection (WebSocket GET /rpc/ws or "
                "`loopgate rpc` on stdio); over plain HTTP, poll run.events",
            )
        return self.streams


# --- parameters -------------------------------------------------------------------------


class Params(msgspec.Struct, kw_only=True, rename="camel"):
    """Unknown params are ignored, not refused: a newer client may send more than this server
    knows (and a typo in a required param is still a missing param)."""


class NoParams(Params):
    pass


class StartParams(Params):
    input: str | list[Message] | None = None
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    subscribe: bool = False
    run_id: RunId | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    approval: Literal["auto", "always", "never"] = "auto"
    source: Literal["loop", "ingest"] | None = None
    replay: str | None = None
    pace: Literal["recorded", "fast"] = "fast"
    # The agent to run (agent.list names them); none: the thread's, else the default one.
    agent: str | None = None
    multitask_strategy: MultitaskStrategy | None = None  # as POST /v1/runs takes it
    webhook: str | None = None  # told of the run's end (docs/api.md)


class RunParams(Params):
    run_id: str


class ListParams(Params):
    limit: PageSize = 100
    thread_id: str | None = None


class EventsParams(Params):
    run_id: str
    after: Cursor = 0
    limit: PageSize = 100


class SteerParams(Params):
    run_id: str
    content: Annotated[str, msgspec.Meta(min_length=1)]


class RespondParams(Params):
    run_id: str
    request_id: str
    decision: Decision


class SubscribeParams(Params):
    run_id: str
    after: Cursor = 0


class UnsubscribeParams(Params):
    subscription: str


# --- results ----------------------------------------------------------------------------


class RunView(msgspec.Struct, kw_only=True, rename="camel"):
    id: str
    thread_id: str
    source: str
    state: str
    status: str | None
    created_at: int
    last_seq: int
    subscribers: int
    metadata: dict[str, Any]
    input: list[Message]
    # Who started it (docs/auth.md); null for a run recorded before owners were kept.
    owner: Owner | None = None
    # The agent that ran it (loop runs; null for ingested and replayed ones).
    agent: str | None = None


class StartResult(msgspec.Struct, kw_only=True, rename="camel"):
    run_id: str
    thread_id: str
    subscription: str | msgspec.UnsetType = msgspec.UNSET


class RunList(msgspec.Struct, kw_only=True):
    runs: list[RunView]


class EventsPage(msgspec.Struct, kw_only=True):
    events: list[Envelope]
    # Pass as ``after`` to get the next page; ``done`` once the run ended and all was read.
    cursor: int
    done: bool


class CommandView(msgspec.Struct, kw_only=True, rename="camel"):
    run_id: str
    accepted: bool
    detail: str


class SubscribeResult(msgspec.Struct, kw_only=True, rename="camel"):
    subscription: str
    run_id: str


def run_view(info: RunInfo) -> RunView:
    return RunView(
        id=info.id,
        thread_id=info.thread_id,
        source=info.source,
        state=info.state,
        status=info.status,
        created_at=info.created_at,
        last_seq=info.last_seq,
        subscribers=info.subscribers,
        metadata=info.metadata,
        input=info.input,
        owner=info.owner,
        agent=info.agent,
    )


def command_view(result: CommandResult) -> CommandView:
    return CommandView(run_id=result.run_id, accepted=result.accepted, detail=result.detail)


# --- handlers ---------------------------------------------------------------------------


async def run_start(ctx: CallContext, p: StartParams) -> StartResult:
    streams = ctx.need_streams("run.start with subscribe: true") if p.subscribe else None
    if streams is not None:
        streams.check_capacity()  # before the run exists, so a refusal leaves nothing behind
    if p.replay is not None and p.source is not None:
        raise invalid_params("replay", "give either `replay` or `source`, not both")
    request = StartRun(
        input=p.input,
        config=p.config,
        source="replay" if p.replay is not None else (p.source or "loop"),
        replay=p.replay,
        replay_pace=p.pace,
        run_id=p.run_id,
        thread_id=p.thread_id,
        metadata=p.metadata,
        approval=p.approval,
        traceparent=ctx.trace.traceparent,
        tracestate=ctx.trace.tracestate,
        agent=p.agent,
        multitask_strategy=p.multitask_strategy,
        webhook=p.webhook,
    )
    try:
        info = await start_on_thread(ctx.service, request, ctx.limits)
    except ThreadBusy as exc:
        raise RpcError(NOT_ACCEPTED, exc.detail, threadId=exc.thread_id, runId=exc.run_id) from None
    except UnknownAgent as exc:
        raise RpcError(INVALID_PARAMS, exc.message, param="agent", agents=exc.known) from None
    except ClientError as exc:
        # The hub's validation messages, in our words (config, input, replay).
        raise invalid_params(exc.field, exc.message) from None
    result = StartResult(run_id=info.id, thread_id=info.thread_id)
    if streams is not None:
        result.subscription = await streams.subscribe(info.id, 0)
    return result


async def run_get(ctx: CallContext, p: RunParams) -> RunView:
    return run_view(await ctx.service.get(p.run_id, attachments=True))


async def run_list(ctx: CallContext, p: ListParams) -> RunList:
    infos = await ctx.service.list_runs(limit=p.limit, thread_id=p.thread_id)
    return RunList(runs=[run_view(i) for i in infos])


async def run_events(ctx: CallContext, p: EventsParams) -> EventsPage:
    events = bounded_page(
        await ctx.service.history(p.run_id, after=p.after, limit=p.limit), ctx.max_result_bytes
    )
    info = await ctx.service.get(p.run_id)
    cursor = events[-1].seq if events else p.after
    return EventsPage(
        events=events, cursor=cursor, done=info.state == "finished" and cursor >= info.last_seq
    )


def bounded_page(events: list[Envelope], max_bytes: int) -> list[Envelope]:
    """The first events that fit in ``max_bytes`` encoded (always at least one: a page must
    move the cursor); the client pages on from the cursor for the rest."""
    used = 0
    for count, env in enumerate(events):
        used += len(encode_envelope(env)) + 1
        if used > max_bytes and count:
            return events[:count]
    return events


async def run_cancel(ctx: CallContext, p: RunParams) -> CommandView:
    # Cancelling a finished run is a no-op (accepted: false), not an error: cancel is idempotent.
    return command_view(await ctx.service.cancel(p.run_id))


async def _accepted(ctx: CallContext, result: CommandResult) -> CommandView:
    if result.accepted:
        return command_view(result)
    info = await ctx.service.get(result.run_id)
    if info.state == "finished":
        raise RpcError(
            RUN_FINISHED,
            f"run {info.id!r} has already finished ({info.status})",
            runId=info.id,
            status=info.status,
        )
    raise RpcError(NOT_ACCEPTED, result.detail, runId=info.id)


async def run_steer(ctx: CallContext, p: SteerParams) -> CommandView:
    return await _accepted(ctx, await ctx.service.steer(p.run_id, p.content))


async def run_respond(ctx: CallContext, p: RespondParams) -> CommandView:
    return await _accepted(ctx, await ctx.service.respond(p.run_id, p.request_id, p.decision))


async def run_subscribe(ctx: CallContext, p: SubscribeParams) -> SubscribeResult:
    streams = ctx.need_streams("run.subscribe")
    return SubscribeResult(subscription=await streams.subscribe(p.run_id, p.after), run_id=p.run_id)


async def run_unsubscribe(ctx: CallContext, p: UnsubscribeParams) -> bool:
    if not ctx.need_streams("run.unsubscribe").unsubscribe(p.subscription):
        raise RpcError(
            SUBSCRIPTION_NOT_FOUND,
            f"no subscription {p.subscription!r} on this connection",
            subscription=p.subscription,
        )
    return True


@functools.cache
def compact_contract() -> msgspec.Raw:
    # The file is pretty-printed; its newlines would break stdio's one-message-per-line framing.
    return msgspec.Raw(msgspec.json.encode(msgspec.json.decode(contract_bytes())))


async def contract_get(ctx: CallContext, p: NoParams) -> msgspec.Raw:
    return compact_contract()


class AgentList(msgspec.Struct, kw_only=True):
    agents: list[AgentInfo]


async def agent_list(ctx: CallContext, p: NoParams) -> AgentList:
    return AgentList(agents=await ctx.service.agents())


# --- the table --------------------------------------------------------------------------

Handler = Callable[[CallContext, Any], Awaitable[Any]]


class Method(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    handler: Handler
    # A Struct (named or positional by field order) or any msgspec type the raw params
    # convert to as a whole (e.g. ``list[int]`` for a variadic method).
    params: Any = NoParams
    result: Any = Any
    summary: str = ""
    description: str = ""
    errors: tuple[int, ...] = ()
    streaming: bool = False  # WebSocket/stdio only


def method_table(*methods: Method) -> dict[str, Method]:
    return {m.name: m for m in methods}


_RUN_ERRORS = (RUN_NOT_FOUND,)

METHODS: Mapping[str, Method] = method_table(
    Method(
        name="run.start",
        handler=run_start,
        params=StartParams,
        result=StartResult,
        summary="Start a run of the agent loop (or an ingest or replay run).",
        description="`input` is a prompt string or the whole conversation as messages. A "
        "prompt string with the `threadId` of a thread that has runs continues that thread: "
        "the run starts from its latest run's input and output, then the prompt (after an "
        "`ask_user`, the prompt is the answer: that call's result); -32007 while the thread's "
        "latest run is still going. `subscribe: true` (streaming transports) also subscribes "
        "from the first event; the response then carries the subscription id and comes "
        "before any of its notifications. `params._meta.traceparent` (and `tracestate`) "
        "becomes the run's trace parent.",
        errors=(INVALID_PARAMS, LIMIT_REACHED, RUN_EXISTS, STREAMING_REQUIRED, NOT_ACCEPTED),
    ),
    Method(
        name="run.get",
        handler=run_get,
        params=RunParams,
        result=RunView,
        summary="A run's state.",
        errors=_RUN_ERRORS,
    ),
    Method(
        name="run.list",
        handler=run_list,
        params=ListParams,
        result=RunList,
        summary="Runs, newest first (only those of `threadId` when given).",
    ),
    Method(
        name="run.events",
        handler=run_events,
        params=EventsParams,
        result=EventsPage,
        summary="A page of a run's events after `after` (for clients without a stream).",
        description="Call again with `after: cursor` until `done` is true.",
        errors=_RUN_ERRORS,
    ),
    Method(
        name="run.cancel",
        handler=run_cancel,
        params=RunParams,
        result=CommandView,
        summary="Ask a run to stop; `accepted: false` if it had already finished.",
        errors=_RUN_ERRORS,
    ),
    Method(
        name="run.steer",
        handler=run_steer,
        params=SteerParams,
        result=CommandView,
        summary="Queue a user message the loop applies at its next round.",
        errors=(RUN_NOT_FOUND, RUN_FINISHED, NOT_ACCEPTED),
    ),
    Method(
        name="run.respond",
        handler=run_respond,
        params=RespondParams,
        result=CommandView,
        summary="Answer a pending permission request (the `requestId` of a "
        "`permission_request` event).",
        errors=(RUN_NOT_FOUND, RUN_FINISHED, NOT_ACCEPTED),
    ),
    Method(
        name="run.subscribe",
        handler=run_subscribe,
        params=SubscribeParams,
        result=SubscribeResult,
        summary="Stream a run's events after `after` as `run.event` notifications, then `run.end`.",
        errors=(RUN_NOT_FOUND, LIMIT_REACHED, STREAMING_REQUIRED),
        streaming=True,
    ),
    Method(
        name="run.unsubscribe",
        handler=run_unsubscribe,
        params=UnsubscribeParams,
        result=bool,
        summary="Stop a subscription of this connection.",
        errors=(SUBSCRIPTION_NOT_FOUND, STREAMING_REQUIRED),
        streaming=True,
    ),
    Method(
        name="agent.list",
        handler=agent_list,
        result=AgentList,
        summary="The agents runs may be started on (`run.start`'s `agent`), the default first.",
    ),
    Method(
        name="contract.get",
        handler=contract_get,
        result=dict[str, Any],
        summary="The runtime contract: event kinds, completion statuses, hooks, LoopConfig.",
    ),
)
