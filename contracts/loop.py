"""The loop port: how the gateway runs a turn of any agent loop.

Every run a front end starts goes through this port. The reference CoreLoop is one
implementation; a user's loop plugs in the same way — in-process (an async generator), over
HTTP (an NDJSON response) or as a stdio child (JSON-RPC). The gateway builds a
:class:`LoopRequest`, hands the loop a :class:`RunContext` and takes the events it emits;
cancel, steering and permission answers reach the loop while it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from .messages import Message, ToolSpec
from .parts import Part
from .principal import DEFAULT_TENANT, GRANTS, LOCAL, Principal, Scope

Approval = Literal["auto", "always", "never"]


class LoopPrincipal(msgspec.Struct, frozen=True, kw_only=True):
    """Who asked for the run, as the loop learns it: the request's principal without its
    limits. No credential ever reaches a loop (the gateway checked it and keeps it).

    ``subject`` and ``tenant`` are the run's owner; ``scopes`` what the caller may do at the
    gateway (``admin``, ``run``, ``read``); ``name`` a display name (a key's name, a token's
    ``name`` claim) or None; ``via`` how it was proven: ``key``, ``jwt``, ``proxy``, ``token``
    or ``local`` (the machine's own user: no credential configured, or a stdio command).
    """

    subject: str
    tenant: str = DEFAULT_TENANT
    scopes: tuple[Scope, ...] = ("run",)
    name: str | None = None
    via: str = "local"

    @classmethod
    def of(cls, principal: Principal) -> LoopPrincipal:
        return cls(
            subject=principal.subject,
            tenant=principal.tenant,
            scopes=principal.scopes,
            name=principal.name,
            via=principal.via,
        )

    def may(self, action: Literal["all", "start", "control", "read"]) -> bool:
        """Whether the caller's scopes grant ``action`` at the gateway, as
        :meth:`contracts.principal.Principal.may` says (a tool authorising by scope)."""
        return any(action in GRANTS[scope] for scope in self.scopes)


# Who a run acts for when no request named anyone: the machine's own user.
LOCAL_LOOP_PRINCIPAL = LoopPrincipal.of(LOCAL)


class LoopRequest(msgspec.Struct, kw_only=True):
    """One turn to run. This is also the JSON body an HTTP loop receives and the params of a
    stdio loop's ``run.start``.

    ``messages`` is the thread so far; ``input`` is the new user message, split off the end of
    the conversation (empty when the turn continues something else, e.g. a tool result).
    When that message carries attachments, ``input`` is its text (each attachment named) and
    ``input_parts`` the message's parts, in order (contracts/parts.py); else it is empty.
    """

    run_id: str
    thread_id: str
    input: str = ""
    input_parts: list[Part] = msgspec.field(default_factory=list)
    messages: list[Message] = msgspec.field(default_factory=list)
    # Tools the client declared and executes itself (AG-UI frontend tools): the loop emits the
    # call and ends the turn waiting for the client (completion waiting_user, client_tool).
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    # Which tool calls should wait for a person: those the tool marks, all, or none.
    approval: Approval = "auto"
    # MCP servers the client asked the agent to use (ACP session/new ``mcpServers``).
    mcp_servers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # W3C trace context of the run's span (or the caller's), for the loop's own spans.
    traceparent: str | None = None
    tracestate: str | None = None
    # Who asked for the run (the request's principal; never its credential).
    principal: LoopPrincipal = LOCAL_LOOP_PRINCIPAL
    # Which attempt at the run this is. Past the first (the run's instance was lost, or shut
    # down, and another resumes it: a loop that declares itself ``resumable``), ``events`` is
    # what the run emitted so far, ``{seq, kind, data}`` each, in seq order; the loop goes on
    # from there (the reference loop: after its last completed round).
    attempt: int = 1
    events: list[dict[str, Any]] = msgspec.field(default_factory=list)


# Called with each event the loop produces (kind, data). Never blocks.
Emit = Callable[[str, dict[str, Any]], None]


class LoopFault(Exception):
    """A loop broke the port's contract or could not be reached.

    ``reason`` becomes the run's ``completion.reason``; ``message`` is what clients read, so it
    says what went wrong without internals (details go to the log).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class RunContext(Protocol):
    """What a loop sees of its run while it runs."""

    @property
    def request(self) -> LoopRequest: ...

    @property
    def run_id(self) -> str: ...

    @property
    def thread_id(self) -> str: ...

    @property
    def input(self) -> str: ...

    @property
    def input_parts(self) -> list[dict[str, Any]]:
        """The new message's parts, as plain dicts, when it carries attachments (else empty);
        a loop gets only the kinds it declared it takes (:class:`TakesParts`)."""
        ...

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The thread so far as plain dicts: ``{role, content, tool_calls?, tool_call_id?}``."""
        ...

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Client tools as plain dicts: ``{name, description, parameters}``."""
        ...

    @property
    def config(self) -> dict[str, Any]: ...

    @property
    def principal(self) -> LoopPrincipal:
        """Who asked for the run: subject, tenant, scopes, name, how it was proven."""
        ...

    @property
    def attempt(self) -> int:
        """1, or the attempt a resumable loop's run is resumed as (``LoopRequest.attempt``)."""
        ...

    @property
    def events(self) -> list[dict[str, Any]]:
        """What the run emitted before this attempt, ``{seq, kind, data}`` each (empty on the
        first)."""
        ...

    @property
    def cancelled(self) -> bool:
        """A client asked the run to stop: emit ``completion{cancelled}`` and return."""
        ...

    async def wait_cancelled(self) -> None: ...

    def take_steers(self) -> list[str]:
        """Steering messages received since the last call (apply them, emit ``steer``)."""
        ...

    async def next_steer(self) -> str:
        """Wait for the next steering message."""
        ...

    async def ask_permission(
        self,
        tool_call: Mapping[str, Any],
        *,
        options: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> str:
        """Ask the run's clients whether ``tool_call`` (``{id, name, arguments, kind?}``) may
        run; returns their decision (``allow_once``, ``allow_always``, ``reject_once``,
        ``reject_always``), or ``reject_once`` when nobody answers in time.

        The gateway publishes ``permission_request`` and ``permission_result`` itself."""
        ...


class LoopRun(Protocol):
    """One turn of a loop, from start to its terminal completion."""

    async def run(self, emit: Emit) -> None:
        """Produce the turn's events; return after the terminal completion. Raise
        :class:`LoopFault` when the loop breaks the contract or cannot be reached."""
        ...

    def cancel(self) -> None:
        """Ask the turn to stop (returns at once); it should end with completion{cancelled}."""
        ...

    async def steer(self, content: str) -> str | None:
        """Deliver a steering message; a string is the reason it was not taken."""
        ...


class AgentLoop(Protocol):
    """A source of turns. Started once with the gateway, closed when it stops."""

    # Shown in a run's metadata (``loop``) and in logs: "reference", "python:pkg.mod:attr", …
    name: str
    # Whether the gateway should guard the loop's events (payload checks, first-event and idle
    # timeouts). False only for loops that are part of loopgate itself.
    untrusted: bool

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def open(self, ctx: RunContext) -> LoopRun: ...


# What a loop may offer beyond AgentLoop; the gateway asks with isinstance (they are runtime
# checkable), so a loop without them is still a loop.


@runtime_checkable
class ChecksRequests(Protocol):
    """A loop that vets a run's request before the run exists (the reference loop checks its
    config): ValueError, in the client's terms, refuses it as the client's mistake."""

    def check(self, request: LoopRequest) -> None: ...


@runtime_checkable
class TakesParts(Protocol):
    """A loop that declares the attachments it takes: the part kinds besides text (``image``,
    ``audio``, ``file``, ``resource``), or None for every kind. A loop without it takes text
    only; a run whose messages carry another kind is refused, naming it."""

    accepts: frozenset[str] | None


@runtime_checkable
class Resumable(Protocol):
    """A loop that says whether its runs can be resumed by another gateway instance from the
    run's events so far (``LoopRequest.attempt`` and ``events``) when theirs is lost. A loop
    without it is not: its runs end ``owner_lost`` with their instance."""

    resumable: bool


@runtime_checkable
class TracksReaching(Protocol):
    """A run context that is told while a plug is still reaching its loop (a stdio child being
    started again): that wait is bounded by the connect timeout, and the first-event timeout
    counts from when the loop has the run."""

    def reaching(self) -> AbstractContextManager[None]: ...


@runtime_checkable
class ReleasesThreads(Protocol):
    """A loop that holds something per thread (the reference loop: a session's MCP servers)
    and lets go of it when the thread's client is gone."""

    async def release_thread(self, thread_id: str) -> None: ...
