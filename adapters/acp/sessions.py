"""ACP sessions: each is a thread of the hub. :class:`Sessions` holds one connection's (the
least recently used idle ones go past ``max_sessions``) and finds the others from what the
journal keeps: a thread's record (session/new in another process) and its runs."""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, Literal

from ...contracts.agents import AgentInfo
from ...contracts.history import Conversation
from ...contracts.parts import text_of
from ...contracts.ports import RunInfo, RunService
from ..shared.rpc_errors import INVALID_PARAMS
from .choices import AgentMenu, approval_option
from .errors import AgentError, not_found
from .options import AgentOptions

Approval = Literal["auto", "always"]


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

    def config_options(self) -> list[dict[str, Any]]:
        # The agent first: ACP clients show the options in the order given.
        # One agent to run on (a connection for one agent): nothing to choose.
        chosen = (
            [] if self.agent is None or not self.menu.offered else [self.menu.option(self.agent)]
        )
        return [*chosen, approval_option(self.approval)]


def iso(ts_ns: int) -> str:
    return dt.datetime.fromtimestamp(ts_ns / 1e9, dt.UTC).isoformat().replace("+00:00", "Z")


class Sessions:
    """The sessions of one connection, least recently used first."""

    def __init__(self, service: RunService, options: AgentOptions) -> None:
        self.service = service
        self.options = options
        self.held: OrderedDict[str, Session] = OrderedDict()

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self.held.values()))

    def get(self, session_id: str) -> Session | None:
        """The session if this connection has it (not counted as a use)."""
        return self.held.get(session_id)

    def forget(self, session_id: str) -> None:
        self.held.pop(session_id, None)

    def remember(self, session: Session) -> Session:
        held = self.held
        held[session.id] = session
        held.move_to_end(session.id)
        while len(held) > self.options.max_sessions:
            idle = next((s for s in held.values() if s.active is None), None)
            if idle is None:
                break
            del held[idle.id]
        return session

    async def runs(self, session_id: str) -> list[RunInfo]:
        """The session's runs, oldest first."""
        runs = await self.service.list_runs(
            limit=self.options.max_runs_per_session, thread_id=session_id
        )
        return sorted(runs, key=lambda r: r.created_at)

    async def find(self, session_id: str, cwd: str | None = None) -> Session:
        """The session, this connection's or one its thread's record or runs know; -32002
        when there is none."""
        session = self.held.get(session_id)
        if session is not None:
            self.held.move_to_end(session_id)
            return session
        runs = await self.service.list_runs(limit=1, thread_id=session_id)
        if runs:
            return await self.open(session_id, cwd or self.cwd_of(runs[0].metadata), runs[0])
        recorded = await self.recorded_cwd(session_id)  # -32002 when there is none
        return await self.open(session_id, cwd or recorded, None)

    async def open(self, session_id: str, cwd: str, newest: RunInfo | None) -> Session:
        """A session new to this connection, on its thread's agent (``newest``: its newest
        run, if it has one)."""
        # Asked each time: the gateway's agents may change while an IDE stays connected.
        menu = AgentMenu(await self.served())
        pinned = self.options.agent
        agent = pinned if pinned is not None else menu.of_thread(newest)
        return self.remember(Session(session_id, cwd, menu, agent))

    async def served(self) -> list[AgentInfo]:
        """The agents this connection's sessions run on: the one it is for, else all the
        gateway's; -32602 when the one it is for is not served."""
        agents = await self.service.agents()
        pinned = self.options.agent
        if pinned is None:
            return agents
        mine = [a for a in agents if a.name == pinned]
        if agents and not mine:
            raise AgentError(
                INVALID_PARAMS,
                f"Invalid params: no agent named {pinned!r}; this gateway serves: "
                f"{', '.join(a.name for a in agents)}",
                {"agents": [a.name for a in agents]},
            )
        return mine

    async def recorded_cwd(self, session_id: str) -> str:
        """The cwd of a session that has no runs yet, from its thread's record (session/new
        in another process); -32002 when there is none."""
        thread = await self.service.get_thread(session_id)
        if thread is None:
            raise not_found(session_id)
        return self.cwd_of(thread.metadata)

    def cwd_of(self, metadata: dict[str, Any]) -> str:
        acp = metadata.get("acp")
        cwd = acp.get("cwd") if isinstance(acp, dict) else None
        return cwd if isinstance(cwd, str) else self.options.default_cwd

    async def listing(self, cwd: str | None, cursor: str | None) -> dict[str, Any]:
        """session/list: sessions with runs (as of their newest run) and recorded ones that
        have none yet, newest first together; then this connection's own that neither knows."""
        newest: dict[str, tuple[int, dict[str, Any]]] = {}
        for run in await self.service.list_runs(limit=self.options.list_scan_runs):
            if run.thread_id in newest:
                continue
            info: dict[str, Any] = {"sessionId": run.thread_id, "cwd": self.cwd_of(run.metadata)}
            if run.input and run.input[0].role == "user" and run.input[0].content:
                info["title"] = " ".join(text_of(run.input[0].content).split())[:80]
            info["updatedAt"] = iso(run.created_at)
            newest[run.thread_id] = (run.created_at, info)
        for thread in await self.service.list_threads(limit=self.options.list_scan_runs):
            if thread.id not in newest:
                info = {
                    "sessionId": thread.id,
                    "cwd": self.cwd_of(thread.metadata),
                    "updatedAt": iso(thread.created_at),
                }
                newest[thread.id] = (thread.created_at, info)
        listed = [info for _, info in sorted(newest.values(), key=lambda e: e[0], reverse=True)]
        for session in reversed(self.held.values()):
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
