"""The ports: how adapters start, watch, steer and cancel runs without importing ``gateway``.

``gateway`` implements these; adapters receive an implementation and depend only on the shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol

import msgspec

from .agents import AgentInfo
from .envelope import Envelope, LoopEvent
from .messages import Message, ToolSpec
from .principal import Owner, Principal

# A tracestate (W3C trace-context: at most 32 list members) longer than this is dropped, not
# cut, by the hub and by telemetry alike.
MAX_TRACESTATE_CHARS = 8_192

RunSource = Literal["loop", "ingest", "replay"]
# ``queued``: accepted, waiting for room to run (RunInfo only; journals record it ``running``).
RunState = Literal["queued", "running", "finished"]
# What a start does when its thread has a run going (adapters/shared/multitask.py): refuse
# (ThreadBusy), wait its turn, cancel the running one and go on from its output, or cancel it
# and go on from the thread as it was before it.
MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
MULTITASK_STRATEGIES: tuple[MultitaskStrategy, ...] = ("reject", "enqueue", "interrupt", "rollback")


class StartRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A request to start a run. ``input`` is a prompt or a message history."""

    input: str | list[Message] | None = None
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    source: RunSource = "loop"
    replay: str | None = None
    run_id: str | None = None
    thread_id: str | None = None
    # Tools the client executes itself (AG-UI frontend tools): the loop emits the call and
    # suspends the turn instead of running it.
    client_tools: list[ToolSpec] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    traceparent: str | None = None
    # W3C tracestate that came with the traceparent (vendor data the trace carries on).
    tracestate: str | None = None
    replay_pace: Literal["recorded", "fast"] = "fast"
    # Which tool calls wait for a client's approval: those the tool marks (auto), all, or none.
    approval: Literal["auto", "always", "never"] = "auto"
    # MCP servers the client asked the agent to use (ACP session/new ``mcpServers``), handed
    # to the loop (the reference loop connects them for the thread).
    mcp_servers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # Who asked: set by the run service from the request's principal (whatever a client put
    # here is replaced), and handed to the loop (never the credential).
    principal: Principal | None = None
    # The agent to run (contracts.agents), for the ``loop`` source: None is the thread's agent
    # when it has runs, else the default one. The run service sets it to the one it chose.
    agent: str | None = None
    # The run needs its thread to itself (a prompt continuing it: adapters/shared/threads.py):
    # the run service claims the thread for as long as the run goes, across every instance
    # sharing its journal, and refuses the start (ThreadBusy) while another such run holds it.
    exclusive: bool = False
    # One run per thread at a time, and what to do when the thread has one going. None: the
    # rule above as it was (``exclusive`` starts are refused, others run side by side).
    multitask_strategy: MultitaskStrategy | None = None
    # Where the gateway POSTs the run's final state once it has ended (contracts.webhooks):
    # checked against the operator's allowlist by the adapter, before the start.
    webhook: str | None = None


class RunInfo(msgspec.Struct, kw_only=True):
    id: str
    thread_id: str
    source: RunSource
    state: RunState
    status: str | None  # the terminal completion status once finished
    created_at: int  # unix ns
    last_seq: int
    subscribers: int = 0
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    # The messages the run was started with (a prompt becomes one user message).
    input: list[Message] = msgspec.field(default_factory=list)
    # What a running run is paused on: "approval" while a permission request of it has no
    # answer yet (known to the instance that runs it); unset, and absent from its JSON,
    # otherwise, so the run bodies clients know stay as they were.
    awaiting: Literal["approval"] | msgspec.UnsetType = msgspec.UNSET
    # Who started it (None: recorded before owners were kept; the admin's only).
    owner: Owner | None = None
    # While ``queued``: its place in the instance's run queue (1: next to run); unset, and
    # absent from its JSON, otherwise.
    queue_position: int | msgspec.UnsetType = msgspec.UNSET
    # The agent that ran it (``loop`` runs; None for ingested and replayed ones).
    agent: str | None = None


class ThreadInfo(msgspec.Struct, kw_only=True):
    """A thread recorded on its own, before (or besides) its runs: an ACP session that has had
    no prompt yet is known to every process sharing the journal only through this record.

    A thread also exists without one, as soon as a run names it (``list_runs(thread_id=…)``).
    """

    id: str
    created_at: int  # unix ns
    # Free-form, as a run's; ACP keeps {"acp": {"cwd": …}} here, as it does on its runs.
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    owner: Owner | None = None


class CommandResult(msgspec.Struct, kw_only=True):
    """Outcome of cancel/steer: ``accepted`` is false for a finished run (a no-op, not an error)."""

    run_id: str
    accepted: bool
    detail: str


class CutOff(Exception):
    """The subscriber fell behind its buffer bound; resume from ``cursor`` via the journal.

    ``rejoin``: it did nothing wrong — this instance's copy of the run was dropped (another
    instance, or the journal, has its real end) — and a stream resumes at once, whatever its
    protocol does with a subscriber that fell behind."""

    def __init__(self, cursor: int, rejoin: bool = False) -> None:
        super().__init__(f"subscriber fell behind; resume after seq {cursor}")
        self.cursor = cursor
        self.rejoin = rejoin


class RunNotFound(LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class ThreadNotFound(RunNotFound):
    """No thread with this id exists for the caller: never recorded, forgotten, or someone
    else's (which is not found either: no existence oracle). A ``RunNotFound`` so every
    adapter answers it with its protocol's not-found."""

    def __init__(self, thread_id: str) -> None:
        LookupError.__init__(self, f"no thread with id {thread_id!r}")
        self.run_id = thread_id
        self.thread_id = thread_id


class RunGone(RunNotFound):
    """The run existed, but has finished and was dropped to stay within the gateway's memory
    or retention bounds: 410, not 404. ``why`` says which bound."""

    def __init__(self, run_id: str, why: str = "the gateway's retention bounds") -> None:
        LookupError.__init__(
            self, f"run {run_id!r} has finished and is no longer kept: it was dropped by {why}"
        )
        self.run_id = run_id
        self.why = why


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


class ServiceUnavailable(Exception):
    """The run service cannot be reached (a remote gateway that is down or refuses);
    ``detail`` says where and why, fit to show a client."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class LimitReached(Exception):
    """Too many runs or subscribers; ``retry_after`` seconds is a hint for the client."""

    def __init__(self, detail: str, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


class Unavailable(LimitReached):
    """What the request needs is out of reach for now (the shared journal's Redis); the
    request may be sent again in ``retry_after`` seconds (HTTP 503)."""


class QuotaExceeded(LimitReached):
    """The caller (or its tenant) is at a quota the operator set: concurrent runs, runs per
    minute, events or tokens per day. HTTP 429 with ``Retry-After``, in each protocol's shape."""


class Forbidden(Exception):
    """The caller's scopes do not allow this (a ``read`` principal starting a run): 403."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class RunTooLarge(LimitReached):
    """The run hit its event-count or byte bound; it has been ended (completion failed)."""


class RunExists(Exception):
    """A client-chosen run id (e.g. AG-UI ``runId``) is already taken."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"a run with id {run_id!r} already exists")
        self.run_id = run_id


class ThreadExists(Exception):
    """A thread with a client-chosen id is already recorded."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"a thread with id {thread_id!r} is already recorded")
        self.thread_id = thread_id


class RunNotIngest(Exception):
    """Events were pushed into a run whose producer is not an external loop."""


class RunFinished(Exception):
    """A command that needs a live run (push, respond) reached a finished one."""

    def __init__(self, run_id: str, status: str | None) -> None:
        super().__init__(f"run {run_id!r} has already finished ({status})")
        self.run_id = run_id
        self.status = status


class Subscription(Protocol):
    """One subscriber's view of a run: a cursor over its journal that follows it live."""

    # While a batch is being written to the client: the time (``anyio.current_time()``) the
    # write must end by, set by the writer (the follow loop). The hub cuts off a subscriber
    # whose write is past it, within a tick of its watch; None while not writing.
    write_deadline: float | None

    @property
    def cursor(self) -> int:
        """The seq of the last event handed out (0 before the first)."""
        ...

    @property
    def done(self) -> bool:
        """True once the run's terminal event has been handed out."""
        ...

    async def next_batch(self, max_wait: float | None = None) -> list[Envelope]:
        """The next events after the cursor, waiting up to ``max_wait`` s (``[]`` when idle;
        the hub honours it within a tick of its watch, no timer per wait).

        Raises :class:`CutOff` once this subscriber has fallen further behind than its bound.
        """
        ...


class RunService(Protocol):
    """Everything an adapter may do with runs."""

    async def start(self, request: StartRun) -> RunInfo: ...

    async def get(self, run_id: str, *, attachments: bool = False) -> RunInfo:
        """``attachments``: the input's attachments with their bytes; else by reference, as
        the journal keeps them (contracts/blobs.py), which is all a run's state needs."""
        ...

    async def list_runs(self, *, limit: int = 100, thread_id: str | None = None) -> list[RunInfo]:
        """Newest first; only the runs of ``thread_id`` when given."""
        ...

    async def cancel(self, run_id: str) -> CommandResult: ...

    async def steer(self, run_id: str, content: str) -> CommandResult: ...

    async def respond(self, run_id: str, request_id: str, decision: str) -> CommandResult:
        """Answer a pending ``permission_request`` of the run (see contracts.gateway_events)."""
        ...

    async def push(self, run_id: str, event: LoopEvent) -> Envelope:
        """Append an event from an external loop (ingest runs only); returns once it is
        committed to the journal (a durable journal: it survives the process)."""
        ...

    async def push_nowait(self, run_id: str, event: LoopEvent) -> Envelope:
        """Like :meth:`push`, but returns as soon as the event has its seq. Acknowledge it
        only after :meth:`wait_committed`: several pushes then share one commit."""
        ...

    async def wait_committed(self, run_id: str, seq: int) -> None:
        """Return once the run's events up to ``seq`` are committed (subscribers see them)."""
        ...

    async def end_ingest(self, run_id: str) -> None:
        """The external producer is done; a terminal completion is synthesised if missing."""
        ...

    def command_channel(
        self, run_id: str
    ) -> AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]:
        """Commands (``cancel``, ``steer``) for the external loop feeding an ingest run."""
        ...

    async def history(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Envelope]: ...

    async def release_thread(self, thread_id: str) -> None:
        """The client of ``thread_id`` is gone (an ACP session closed): the loop may let go of
        what it holds for the thread (the reference loop: the session's MCP servers)."""
        ...

    async def create_thread(
        self, thread_id: str | None = None, *, metadata: dict[str, Any] | None = None
    ) -> ThreadInfo:
        """Record a thread before its first run (an id is made up when none is given), so
        that it outlives this call's process as the journal's runs do.

        Raises :class:`ThreadExists` when ``thread_id`` is recorded already."""
        ...

    async def get_thread(self, thread_id: str) -> ThreadInfo | None:
        """The thread's record, or None when it was never recorded (or has been forgotten)."""
        ...

    async def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        """Recorded threads, newest first."""
        ...

    async def forget_thread(self, thread_id: str) -> bool:
        """Drop the thread's record (its runs stay); False when there was none."""
        ...

    async def agents(self) -> list[AgentInfo]:
        """The agents runs may be started on (StartRun.agent), the default one first."""
        ...

    def subscribe(
        self, run_id: str, *, after: int = 0, consumer: str = "api"
    ) -> AbstractAsyncContextManager[Subscription]:
        """Events with seq > ``after``, history first then live, ending after the terminal one.

        ``consumer`` names the adapter serving it (``sse``, ``agui``, ``acp``…) for telemetry.

        Raises :class:`RunNotFound` or :class:`LimitReached` on entry.
        """
        ...
