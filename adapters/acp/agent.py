"""The ACP agent: sessions are threads, each ``session/prompt`` is one run of the loop.

One instance serves one client connection (stdio, or one WebSocket). It talks to runs only
through :class:`contracts.ports.RunService`, so the same code serves the in-process hub and a
remote gateway. Method names and keyword arguments are the ones the official SDK's router
(``acp.agent.router``) calls after validating params against the ACP schema.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import uuid
from collections import OrderedDict
from typing import Any, Literal, Protocol

import anyio
import msgspec
from anyio.abc import TaskGroup

from loopgate.adapters.acp.choices import (
    AGENT_OPTION,
    APPROVAL_CHOICES,
    APPROVAL_OPTION,
    AgentMenu,
    approval_option,
)
from loopgate.adapters.acp.projector import (
    REQUEST_PERMISSION,
    SESSION_UPDATE,
    AcpItem,
    AcpProjector,
    PermissionAsk,
    PromptAnswer,
    PromptFailure,
    SessionUpdate,
    user_message,
)
from loopgate.adapters.shared.follow import RESUMING, EventStream
from loopgate.adapters.shared.projector import SEEN_CALLS, SeenCall, seen_calls
from loopgate.adapters.shared.rpc_errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RESOURCE_NOT_FOUND,
)
from loopgate.adapters.shared.threads import ThreadBusy, conversation_after_run, latest_run
from loopgate.contracts.agents import UnknownAgent
from loopgate.contracts.client_errors import ClientError
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.history import (
    Conversation,
    asked_text,
    continued,
    conversation_after,
)
from loopgate.contracts.messages import Message
from loopgate.contracts.outbound import OutboundPolicy
from loopgate.contracts.ports import (
    LimitReached,
    QuotaExceeded,
    RunFinished,
    RunInfo,
    RunNotFound,
    RunService,
    StartRun,
)
from loopgate.contracts.projector import ProjectorContext

log = logging.getLogger("loopgate.acp")

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})
Approval = Literal["auto", "always"]
DECISIONS = ("allow_once", "allow_always", "reject_once", "reject_always")


class Peer(Protocol):
    """The client end of the connection (``acp.connection.Connection`` fits)."""

    async def send_notification(self, method: str, params: Any = None) -> None: ...

    async def send_request(self, method: str, params: Any = None) -> Any: ...


class AgentError(Exception):
    """A JSON-RPC error for the client; converted to ``acp.RequestError`` at the edge."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class AgentOptions(msgspec.Struct, frozen=True, kw_only=True):
    name: str = "loopgate"
    version: str = "0.1.0"
    # Tool name → ACP tool kind, from the tools' own metadata (in-process loop).
    tool_kinds: dict[str, str] = msgspec.field(default_factory=dict)
    context_size: int | None = None  # model context window: enables usage_update
    default_cwd: str = "/"
    max_sessions: int = 1024  # per connection; the least recently used idle ones go first
    max_prompt_chars: int = 1_000_000
    max_runs_per_session: int = 1000  # session/load replays at most this many runs
    list_scan_runs: int = 1000  # session/list looks at this many recent runs (and threads)
    list_page_size: int = 100
    # The MCP transports of session/new ``mcpServers`` this agent takes: "stdio" has the
    # gateway start a program, so it is for clients that started the gateway themselves.
    mcp_transports: tuple[str, ...] = ("stdio", "http")
    # The URLs of http MCP servers this agent contacts for its client; None: any (a client
    # that started the gateway itself). Over the network, the operator's allowed_outbound.
    mcp_outbound: OutboundPolicy | None = None


class ActivePrompt:
    """The run a session is working on (a prompt, or a live run followed after a load)."""

    def __init__(self, *, watched: bool = False) -> None:
        self.run_id: str | None = None
        self.cancelled = False
        self.asks: set[str] = set()
        # Followed after a session/load or resume, not started by this connection: its
        # client leaving stops following it, not the run (an admin or a second window of
        # its owner only watched it).
        self.watched = watched


class Session:
    def __init__(self, session_id: str, cwd: str, menu: AgentMenu, agent: str | None) -> None:
        self.id = session_id
        self.cwd = cwd
        self.approval: Approval = "auto"
        # The agents served when the session was opened here, and the one its prompts go to
        # (None where the gateway serves one: nothing to choose).
        self.menu = menu
        self.agent = agent
        self.active: ActivePrompt | None = None
        # The conversation after the session's latest prompt; None: rebuild from the journal.
        self.history: Conversation | None = None
        # session/new ``mcpServers``, as ACP writes them: handed to every run of the session.
        self.mcp_servers: list[dict[str, Any]] = []


def not_found(session_id: str) -> AgentError:
    return AgentError(
        RESOURCE_NOT_FOUND,
        f"Resource not found: no session {session_id!r}",
        {"sessionId": session_id},
    )


def iso(ts_ns: int) -> str:
    return dt.datetime.fromtimestamp(ts_ns / 1e9, dt.UTC).isoformat().replace("+00:00", "Z")


class AcpAgent:
    def __init__(self, service: RunService, options: AgentOptions | None = None) -> None:
        self.service = service
        self.options = options or AgentOptions()
        self.peer: Peer | None = None
        self.background: TaskGroup | None = None
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.client_info: dict[str, Any] = {}
        self.projector_options: dict[str, Any] = {"toolKinds": dict(self.options.tool_kinds)}
        if self.options.context_size:
            self.projector_options["contextSize"] = self.options.context_size

    # --- connection lifecycle -------------------------------------------------------------

    def attach(self, peer: Peer, background: TaskGroup) -> None:
        self.peer = peer
        self.background = background

    async def shutdown(self) -> None:
        """The client went away: stop the runs it started and was waiting for, let go of its
        sessions' MCP servers."""
        for session in list(self.sessions.values()):
            active = session.active
            with anyio.CancelScope(shield=True):
                if active is not None and active.run_id is not None and not active.watched:
                    try:
                        await self.service.cancel(active.run_id)
                    except Exception:
                        log.warning("could not cancel run %s on disconnect", active.run_id)
                await self._release(session)

    async def _release(self, session: Session) -> None:
        if session.mcp_servers:
            try:
                await self.service.release_thread(session.id)
            except Exception:
                log.warning("could not release the MCP servers of session %s", session.id)

    async def _notify(self, params: dict[str, Any]) -> None:
        assert self.peer is not None
        await self.peer.send_notification(SESSION_UPDATE, params)

    # --- initialize -----------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        if client_info is not None:
            self.client_info = {"name": client_info.name, "version": client_info.version}
        version = protocol_version if protocol_version in SUPPORTED_VERSIONS else PROTOCOL_VERSION
        return {
            "protocolVersion": version,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {
                    "http": "http" in self.options.mcp_transports,
                    "sse": False,
                },
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": {
                "name": self.options.name,
                "title": "loopgate",
                "version": self.options.version,
            },
        }

    # --- sessions -------------------------------------------------------------------------

    def _remember(self, session: Session) -> Session:
        self.sessions[session.id] = session
        self.sessions.move_to_end(session.id)
        while len(self.sessions) > self.options.max_sessions:
            idle = next((s for s in self.sessions.values() if s.active is None), None)
            if idle is None:
                break
            del self.sessions[idle.id]
        return session

    async def _runs(self, session_id: str) -> list[RunInfo]:
        """The session's runs, oldest first."""
        runs = await self.service.list_runs(
            limit=self.options.max_runs_per_session, thread_id=session_id
        )
        return sorted(runs, key=lambda r: r.created_at)

    async def _session(self, session_id: str, cwd: str | None = None) -> Session:
        session = self.sessions.get(session_id)
        if session is not None:
            self.sessions.move_to_end(session_id)
            return session
        runs = await self.service.list_runs(limit=1, thread_id=session_id)
        if runs:
            return await self._open(session_id, cwd or self._cwd_of(runs[0].metadata), runs[0])
        recorded = await self._recorded_cwd(session_id)  # -32002 when there is none
        return await self._open(session_id, cwd or recorded, None)

    async def _open(self, session_id: str, cwd: str, newest: RunInfo | None) -> Session:
        """A session new to this connection, on its thread's agent (``newest``: its newest
        run, if it has one)."""
        # Asked each time: the gateway's agents may change while an IDE stays connected.
        menu = AgentMenu(await self.service.agents())
        return self._remember(Session(session_id, cwd, menu, menu.of_thread(newest)))

    async def _recorded_cwd(self, session_id: str) -> str:
        """The cwd of a session that has no runs yet, from its thread's record (session/new
        in another process); -32002 when there is none."""
        thread = await self.service.get_thread(session_id)
        if thread is None:
            raise not_found(session_id)
        return self._cwd_of(thread.metadata)

    def _cwd_of(self, metadata: dict[str, Any]) -> str:
        acp = metadata.get("acp")
        cwd = acp.get("cwd") if isinstance(acp, dict) else None
        return cwd if isinstance(cwd, str) else self.options.default_cwd

    def config_options(self, session: Session) -> list[dict[str, Any]]:
        # The agent first: ACP clients show the options in the order given.
        chosen = [] if session.agent is None else [session.menu.option(session.agent)]
        return [*chosen, approval_option(session.approval)]

    def mcp_servers(self, servers: Any) -> list[dict[str, Any]]:
        """session/new ``mcpServers`` as plain ACP objects; -32602 for a transport this agent
        does not take."""
        taken: list[dict[str, Any]] = []
        for i, server in enumerate(servers or []):
            entry = (
                server
                if isinstance(server, dict)
                else server.model_dump(mode="json", by_alias=True, exclude_none=True)
            )
            transport = entry.get("type", "stdio")
            if transport not in self.options.mcp_transports:
                why = (
                    "this gateway starts no programs for clients on the network (its operator "
                    "can allow it with --acp-remote-stdio-mcp); use an http MCP server"
                    if transport == "stdio"
                    else f"{transport} MCP servers are not supported"
                )
                raise AgentError(
                    INVALID_PARAMS,
                    f"Invalid params: mcpServers[{i}] ({entry.get('name')}): {why}",
                    {"field": f"mcpServers[{i}]"},
                )
            outbound = self.options.mcp_outbound
            url = entry.get("url")
            if transport == "http" and outbound is not None and not outbound.allows(str(url)):
                # Refused before anything is contacted: the gateway's network is not the
                # client's to probe. The URL is not repeated (it may carry a secret).
                raise AgentError(
                    INVALID_PARAMS,
                    f"Invalid params: mcpServers[{i}].url ({entry.get('name')}): this gateway "
                    "contacts only the MCP servers its operator allowed (allowed_outbound)",
                    {"field": f"mcpServers[{i}].url"},
                )
            taken.append(entry)
        return taken

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **_meta: Any
    ) -> dict[str, Any]:
        servers = self.mcp_servers(mcp_servers)
        session_id = f"sess_{uuid.uuid4().hex}"
        # Recorded where the runs are: a client that runs an agent process per command
        # (acpx) resumes or prompts it from another process. Not its mcpServers: they may
        # carry secrets (env, headers), and resume and load name them again anyway.
        await self.service.create_thread(session_id, metadata={"acp": {"cwd": cwd}})
        session = await self._open(session_id, cwd, None)
        session.history = Conversation([])
        session.mcp_servers = servers
        return {"sessionId": session.id, "configOptions": self.config_options(session)}

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        servers = self.mcp_servers(mcp_servers)
        runs = await self._runs(session_id)
        session = self.sessions.get(session_id)
        if session is None:
            if not runs:
                await self._recorded_cwd(session_id)  # a session with nothing to replay
            session = await self._open(session_id, cwd, runs[-1] if runs else None)
        session.mcp_servers = servers
        if session.active is not None:
            raise AgentError(
                INVALID_REQUEST,
                f"session {session_id!r} has a prompt running; load it after the answer",
            )
        live: tuple[RunInfo, int, AcpProjector] | None = None
        for run in runs:
            text = asked_text(run.input)
            if text:
                await self._notify(user_message(session_id, text).params)
            projector = self._projector(run.id, session_id)
            events = await self.service.history(run.id)
            for env in events:
                for item in projector.feed(env):
                    if isinstance(item, SessionUpdate):
                        await self._notify(item.params)
            if run.state == "running":
                live = (run, events[-1].seq if events else 0, projector)
        session.history = None
        if live is not None:
            self._watch(session, *live)
        return {"configOptions": self.config_options(session)}

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        servers = self.mcp_servers(mcp_servers)
        session = await self._session(session_id, cwd)
        session.mcp_servers = servers
        if session.active is None:
            runs = await self.service.list_runs(limit=1, thread_id=session_id)
            if runs and runs[0].state == "running":
                run = runs[0]
                # No replay: the client has the run so far, its tool calls included.
                seen = seen_calls(await self.service.history(run.id, limit=run.last_seq))
                self._watch(session, run, run.last_seq, self._projector(run.id, session_id, seen))
        return {"configOptions": self.config_options(session)}

    async def close_session(self, session_id: str, **_meta: Any) -> dict[str, Any]:
        session = await self._session(session_id)  # -32002 if it never existed
        await self.cancel(session_id)
        self.sessions.pop(session_id, None)
        await self._release(session)
        # Its record goes: a session that never had a prompt is then unknown everywhere; one
        # with runs is still found (and listed, loaded) through them.
        await self.service.forget_thread(session_id)
        return {}

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_meta: Any
    ) -> dict[str, Any]:
        # Sessions with runs (as of their newest run) and recorded ones that have none yet,
        # newest first together; then this connection's own that neither knows.
        newest: dict[str, tuple[int, dict[str, Any]]] = {}
        for run in await self.service.list_runs(limit=self.options.list_scan_runs):
            if run.thread_id in newest:
                continue
            info: dict[str, Any] = {"sessionId": run.thread_id, "cwd": self._cwd_of(run.metadata)}
            if run.input and run.input[0].role == "user" and run.input[0].content:
                info["title"] = " ".join(run.input[0].content.split())[:80]
            info["updatedAt"] = iso(run.created_at)
            newest[run.thread_id] = (run.created_at, info)
        for thread in await self.service.list_threads(limit=self.options.list_scan_runs):
            if thread.id not in newest:
                info = {
                    "sessionId": thread.id,
                    "cwd": self._cwd_of(thread.metadata),
                    "updatedAt": iso(thread.created_at),
                }
                newest[thread.id] = (thread.created_at, info)
        listed = [info for _, info in sorted(newest.values(), key=lambda e: e[0], reverse=True)]
        for session in reversed(self.sessions.values()):
            if session.id not in newest:
                listed.append({"sessionId": session.id, "cwd": session.cwd})
        if cwd is not None:
            listed = [s for s in listed if s["cwd"] == cwd]
        start = 0
        if cursor is not None:
            if (
                not (cursor.isascii() and cursor.isdigit())
                or len(cursor) > 19
                or int(cursor) > len(listed)
            ):
                raise AgentError(
                    INVALID_PARAMS, "Invalid params: cursor: not a cursor this agent gave out"
                )
            start = int(cursor)
        page = self.options.list_page_size
        result: dict[str, Any] = {"sessions": listed[start : start + page]}
        if start + page < len(listed):
            result["nextCursor"] = str(start + page)
        return result

    async def set_config_option(
        self, session_id: str, config_id: str, value: Any, **_meta: Any
    ) -> dict[str, Any]:
        session = await self._session(session_id)
        if config_id == AGENT_OPTION and session.agent is not None:
            # The next prompt goes to it, with the conversation so far: the thread moves on.
            session.agent = chosen_agent(session.menu, value)
        elif config_id == APPROVAL_OPTION:
            if value not in APPROVAL_CHOICES:
                raise AgentError(
                    INVALID_PARAMS,
                    "Invalid params: value: approval must be one of " + ", ".join(APPROVAL_CHOICES),
                    {"field": "value"},
                )
            session.approval = value
        else:
            have = ", ".join(option["id"] for option in self.config_options(session))
            raise AgentError(
                INVALID_PARAMS,
                f"Invalid params: configId: unknown option {config_id!r} (have: {have})",
                {"field": "configId"},
            )
        return {"configOptions": self.config_options(session)}

    # --- prompts --------------------------------------------------------------------------

    def _projector(
        self, run_id: str, session_id: str, seen: dict[str, SeenCall] | None = None
    ) -> AcpProjector:
        options = (
            self.projector_options if not seen else {**self.projector_options, SEEN_CALLS: seen}
        )
        return AcpProjector(
            ProjectorContext(
                run_id=run_id,
                thread_id=session_id,
                protocol_version=PROTOCOL_VERSION,
                options=options,
            )
        )

    def prompt_text(self, blocks: list[Any]) -> str:
        parts: list[str] = []
        for i, block in enumerate(blocks):
            kind = getattr(block, "type", None)
            if kind == "text":
                parts.append(block.text)
            elif kind == "resource_link":
                label = block.title or block.name
                line = f"[{label}]({block.uri})"
                if block.description:
                    line += f" — {block.description}"
                parts.append(line)
            elif kind == "resource" and hasattr(block.resource, "text"):
                res = block.resource
                parts.append(f'<resource uri="{res.uri}">\n{res.text}\n</resource>')
            else:
                what = (
                    "binary embedded resources are not supported"
                    if kind == "resource"
                    else f"content block type {kind!r} is not supported "
                    f"(promptCapabilities.{kind} is false)"
                )
                raise AgentError(
                    INVALID_PARAMS,
                    f"Invalid params: prompt[{i}]: {what}",
                    {"field": f"prompt[{i}].type", "type": kind},
                )
        text = "\n\n".join(p for p in parts if p)
        if not text.strip():
            raise AgentError(INVALID_PARAMS, "Invalid params: prompt: the prompt has no text")
        if len(text) > self.options.max_prompt_chars:
            raise AgentError(
                INVALID_PARAMS,
                f"Invalid params: prompt: longer than {self.options.max_prompt_chars} characters",
            )
        return text

    async def _history(self, session: Session) -> Conversation:
        """The session's conversation so far (adapters/shared/threads.py: the same rule as a
        native or JSON-RPC run on a thread); a prompt running on it is -32600."""
        try:
            last = await latest_run(self.service, session.id)
        except ThreadBusy:
            raise self._busy(session.id) from None
        if session.history is not None:
            return session.history
        return (
            Conversation([]) if last is None else await conversation_after_run(self.service, last)
        )

    def _busy(self, session_id: str) -> AgentError:
        return AgentError(
            INVALID_REQUEST,
            f"session {session_id!r} already has a prompt running; wait for its answer or "
            "send session/cancel",
            {"sessionId": session_id},
        )

    async def prompt(self, prompt: list[Any], session_id: str, **meta: Any) -> dict[str, Any]:
        session = await self._session(session_id)
        if session.active is not None:
            raise self._busy(session_id)
        text = self.prompt_text(prompt)
        active = session.active = ActivePrompt()
        try:
            # After an ask_user, the prompt is its answer: the waiting call's result.
            messages = continued(await self._history(session), text)
            info = await self._start(session, messages, meta)
            active.run_id = info.id
            if active.cancelled:
                await self.service.cancel(info.id)
            events: list[Envelope] = []
            terminal = await self._follow(session, active, info.id, 0, events)
            session.history = conversation_after(messages, events)
            return await self._answer(terminal, active, info.id)
        finally:
            session.active = None

    async def _start(
        self, session: Session, messages: list[Message], meta: dict[str, Any]
    ) -> RunInfo:
        # The prompt's `_meta` trace context (W3C names); the hub ignores a malformed one.
        traceparent, tracestate = meta.get("traceparent"), meta.get("tracestate")
        request = StartRun(
            input=messages,
            thread_id=session.id,
            approval=session.approval,
            agent=session.agent,
            metadata={"acp": {"cwd": session.cwd}},
            mcp_servers=session.mcp_servers,
            traceparent=traceparent if isinstance(traceparent, str) else None,
            tracestate=tracestate if isinstance(tracestate, str) else None,
        )
        try:
            return await self.service.start(request)
        except LimitReached as exc:
            # A quota is the caller's own limit, not a busy gateway: its words say which.
            said = (
                exc.detail
                if isinstance(exc, QuotaExceeded)
                else f"the gateway is busy: {exc.detail}"
            )
            raise AgentError(INTERNAL_ERROR, said, {"retryAfter": exc.retry_after}) from None
        except UnknownAgent as exc:
            # A session's thread on an agent the gateway no longer serves.
            raise AgentError(
                INVALID_PARAMS, f"Invalid params: {exc.message}", {"agents": exc.known}
            ) from None
        except ClientError as exc:
            raise AgentError(INVALID_PARAMS, f"Invalid params: {exc.message}") from None

    async def _follow(
        self,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        after: int,
        events: list[Envelope] | None,
        projector: AcpProjector | None = None,
    ) -> PromptAnswer | PromptFailure:
        """Project the run to the client until its terminal event; returns the answer.

        ``projector`` continues one that has already seen the events up to ``after``.
        """
        fresh = projector is None
        projector = projector or self._projector(run_id, session.id)
        async with anyio.create_task_group() as asks:
            stream = _PromptStream(
                self, session, active, run_id, projector, asks, after, fresh, events
            )
            await stream.run()
            # Only now: cancelling while still inside the subscription would cancel its exit.
            asks.cancel_scope.cancel()
        assert stream.end is not None
        return stream.end

    async def _emit(
        self,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        item: AcpItem,
        asks: TaskGroup,
    ) -> PromptAnswer | PromptFailure | None:
        if isinstance(item, SessionUpdate):
            await self._notify(item.params)
        elif isinstance(item, PermissionAsk):
            # Asked in the background: the run's other events keep flowing meanwhile.
            asks.start_soon(self._ask, active, run_id, item)
        else:
            return item
        return None

    async def _ask(self, active: ActivePrompt, run_id: str, ask: PermissionAsk) -> None:
        assert self.peer is not None
        active.asks.add(ask.request_id)
        offered = {o["optionId"] for o in ask.params["options"]}
        decision = "cancelled"
        try:
            response = await self.peer.send_request(REQUEST_PERMISSION, ask.params)
            decision = decision_from(response, offered)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            # The client failed to answer (an error, or the connection closed): not approved.
            log.info("permission request %s got no answer: %s", ask.request_id, type(exc).__name__)
        finally:
            active.asks.discard(ask.request_id)
        if active.cancelled:
            decision = "cancelled"
        await self._respond(run_id, ask.request_id, decision)

    async def _respond(self, run_id: str, request_id: str, decision: str) -> None:
        try:
            await self.service.respond(run_id, request_id, decision)
        except (RunNotFound, RunFinished):
            pass
        except Exception:
            log.warning("could not answer permission request %s of run %s", request_id, run_id)

    async def _answer(
        self, end: PromptAnswer | PromptFailure, active: ActivePrompt, run_id: str
    ) -> dict[str, Any]:
        trace_id = await self._trace_id(run_id)
        if isinstance(end, PromptFailure) and not active.cancelled:
            data = dict(end.data)
            if trace_id:
                data["traceId"] = trace_id
            raise AgentError(end.code, end.message, data)
        if isinstance(end, PromptFailure):
            result: dict[str, Any] = {
                "stopReason": "cancelled",
                "_meta": {"loopgate": {"runId": run_id, "status": "cancelled"}},
            }
        else:
            result = {**end.result, "_meta": {"loopgate": dict(end.result["_meta"]["loopgate"])}}
            if active.cancelled:
                # The client asked to stop: ACP requires "cancelled" whatever the loop did last.
                result["stopReason"] = "cancelled"
        if trace_id:
            result["_meta"]["loopgate"]["traceId"] = trace_id
        return result

    async def _trace_id(self, run_id: str) -> str | None:
        try:
            info = await self.service.get(run_id)
        except Exception:
            return None
        trace_id = info.metadata.get("trace_id")
        return trace_id if isinstance(trace_id, str) else None

    async def cancel(self, session_id: str, **_meta: Any) -> None:
        session = self.sessions.get(session_id)
        active = session.active if session else None
        if active is None or active.cancelled:
            return
        active.cancelled = True
        if active.run_id is None:
            return  # the prompt cancels its run as soon as it has started it
        for request_id in list(active.asks):
            await self._respond(active.run_id, request_id, "cancelled")
        with contextlib.suppress(RunNotFound):
            await self.service.cancel(active.run_id)

    # --- live runs found by session/load or session/resume --------------------------------

    def _watch(
        self, session: Session, run: RunInfo, after: int, projector: AcpProjector | None = None
    ) -> None:
        """Keep streaming a run that is still going (e.g. started by another client)."""
        assert self.background is not None
        active = session.active = ActivePrompt(watched=True)
        active.run_id = run.id
        self.background.start_soon(self._watch_run, session, active, run.id, after, projector)

    async def _watch_run(
        self,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        after: int,
        projector: AcpProjector | None,
    ) -> None:
        try:
            await self._follow(session, active, run_id, after, None, projector)
        except Exception:
            log.warning("stopped following run %s", run_id)
        finally:
            if session.active is active:
                session.active = None
            session.history = None


class _PromptStream(EventStream[AcpItem, list[Envelope]]):
    """A prompt's run (or a live run followed after a load) to the client until its answer:
    updates as notifications, permission questions asked in the background (``asks``), the
    answer kept as ``end``; ``events`` (when given) gets every envelope read, for the session's
    history. Resumed after a cut-off: the answer must come whatever the client's pace."""

    def __init__(
        self,
        agent: AcpAgent,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        projector: AcpProjector,
        asks: TaskGroup,
        after: int,
        start: bool,
        events: list[Envelope] | None,
    ) -> None:
        super().__init__(
            agent.service, run_id, projector, RESUMING, consumer="acp", after=after, start=start
        )
        self.agent, self.session, self.active, self.asks = agent, session, active, asks
        self.events = events
        self.end: PromptAnswer | PromptFailure | None = None

    def project(self, batch: list[Envelope]) -> list[AcpItem]:
        if self.events is not None:
            self.events.extend(batch)
        return super().project(batch)

    def finished(self) -> bool:
        return self.end is not None

    async def send(self, messages: list[AcpItem]) -> None:
        agent, session, active, run_id = self.agent, self.session, self.active, self.run_id
        for item in messages:
            self.end = await agent._emit(session, active, run_id, item, self.asks) or self.end


def chosen_agent(menu: AgentMenu, value: Any) -> str:
    """The agent ``value`` names; -32602 naming the agents served if none."""
    try:
        return menu.check(value)
    except UnknownAgent as exc:
        raise AgentError(
            INVALID_PARAMS,
            f"Invalid params: value: {exc.message}",
            {"field": "value", "agents": exc.known},
        ) from None


def decision_from(response: Any, offered: set[str]) -> str:
    """Map a ``session/request_permission`` answer to a hub decision."""
    outcome = response.get("outcome") if isinstance(response, dict) else None
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return "cancelled"
    option = outcome.get("optionId")
    if isinstance(option, str) and option in offered and option in DECISIONS:
        return option
    return "reject_once"  # an option we never offered is no approval
