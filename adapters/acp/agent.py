"""The ACP agent: sessions are threads, each ``session/prompt`` is one run of the loop.

One instance serves one client connection (stdio, or one WebSocket). It talks to runs only
through :class:`contracts.ports.RunService`, so the same code serves the in-process hub and a
remote gateway. Method names and keyword arguments are the ones the official SDK's router
(``acp.agent.router``) calls after validating params against the ACP schema; what they do is
in the modules beside this one: sessions.py (the sessions of a connection and those the
journal knows), prompts.py (a prompt's run, followed to its answer), permissions.py (the
client asked before a tool runs), choices.py (a session's config options).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ...contracts.agents import AgentInfo
from ...contracts.history import Conversation
from ...contracts.limits import EndpointLimits
from ...contracts.ports import RunService
from ..shared.rpc_errors import INVALID_PARAMS, INVALID_REQUEST
from .capabilities import prompt_capabilities
from .choices import (
    AGENT_OPTION,
    APPROVAL_CHOICES,
    APPROVAL_OPTION,
    chosen_agent,
)
from .errors import AgentError
from .options import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    AgentOptions,
    Peer,
)
from .prompts import Prompts
from .sessions import Session, Sessions

log = logging.getLogger("loopgate.acp")
# An agent built without the gateway's limits (a test's): no webhooks, the default wait.
NO_LIMITS = EndpointLimits()


class AcpAgent:
    def __init__(
        self,
        service: RunService,
        options: AgentOptions | None = None,
        limits: EndpointLimits = NO_LIMITS,
    ) -> None:
        self.service = service
        self.options = options or AgentOptions()
        self.sessions = Sessions(service, self.options)
        # The gateway's bounds of a prompt's start: its wait for the thread, its webhook.
        self.prompts = Prompts(service, self.options, limits)
        self.client_info: dict[str, Any] = {}

    # --- connection lifecycle -------------------------------------------------------------

    def attach(self, peer: Peer, background: TaskGroup) -> None:
        self.prompts.attach(peer, background)

    async def shutdown(self) -> None:
        """The client went away: stop the runs it started and was waiting for, let go of its
        sessions' MCP servers."""
        for session in self.sessions:
            active = session.active
            with anyio.CancelScope(shield=True):
                if active is not None and active.run_id is not None and not active.watched:
                    try:
                        await self.service.cancel(active.run_id)
                    except Exception:
                        log.warning("could not cancel run %s on disconnect", active.run_id)
                await self.release(session)

    async def release(self, session: Session) -> None:
        if session.mcp_servers:
            try:
                await self.service.release_thread(session.id)
            except Exception:
                log.warning("could not release the MCP servers of session %s", session.id)

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
        served = await self.served()
        return {
            "protocolVersion": version,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": prompt_capabilities(served),
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

    async def served(self) -> list[AgentInfo]:
        """The agents this connection's sessions run on, for what it advertises. A service
        that does not answer now (a remote gateway not up yet) fails no ``initialize``: the
        connection then advertises every kind, and each prompt is checked as it comes."""
        try:
            return await self.sessions.served()
        except AgentError:
            raise
        except Exception:
            log.warning("the gateway's agents could not be listed; advertising every kind")
            return []

    # --- sessions -------------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, additional_directories: Any = None, **_meta: Any
    ) -> dict[str, Any]:
        servers = self.sessions.mcp_servers(mcp_servers)
        session_id = f"sess_{uuid.uuid4().hex}"
        # Recorded where the runs are: a client that runs an agent process per command
        # (acpx) resumes or prompts it from another process. Not its mcpServers: they may
        # carry secrets (env, headers), and resume and load name them again anyway.
        await self.service.create_thread(session_id, metadata={"acp": {"cwd": cwd}})
        session = await self.sessions.open(session_id, cwd, None)
        session.history = Conversation([])
        session.mcp_servers = servers
        return {"sessionId": session.id, "configOptions": session.config_options()}

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        servers = self.sessions.mcp_servers(mcp_servers)
        runs = await self.sessions.runs(session_id)
        session = self.sessions.get(session_id)
        if session is None:
            if not runs:
                await self.sessions.recorded_cwd(session_id)  # a session with nothing to replay
            session = await self.sessions.open(session_id, cwd, runs[-1] if runs else None)
        session.mcp_servers = servers
        if session.active is not None:
            raise AgentError(
                INVALID_REQUEST,
                f"session {session_id!r} has a prompt running; load it after the answer",
            )
        await self.prompts.replay(session, runs)
        return {"configOptions": session.config_options()}

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        servers = self.sessions.mcp_servers(mcp_servers)
        session = await self.sessions.find(session_id, cwd)
        session.mcp_servers = servers
        await self.prompts.resume(session)
        return {"configOptions": session.config_options()}

    async def close_session(self, session_id: str, **_meta: Any) -> dict[str, Any]:
        session = await self.sessions.find(session_id)  # -32002 if it never existed
        await self.cancel(session_id)
        self.sessions.forget(session_id)
        await self.release(session)
        # Its record goes: a session that never had a prompt is then unknown everywhere; one
        # with runs is still found (and listed, loaded) through them.
        await self.service.forget_thread(session_id)
        return {}

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_meta: Any
    ) -> dict[str, Any]:
        return await self.sessions.listing(cwd, cursor)

    async def set_config_option(
        self, session_id: str, config_id: str, value: Any, **_meta: Any
    ) -> dict[str, Any]:
        session = await self.sessions.find(session_id)
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
            have = ", ".join(option["id"] for option in session.config_options())
            raise AgentError(
                INVALID_PARAMS,
                f"Invalid params: configId: unknown option {config_id!r} (have: {have})",
                {"field": "configId"},
            )
        return {"configOptions": session.config_options()}

    # --- prompts --------------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **meta: Any) -> dict[str, Any]:
        return await self.prompts.prompt(await self.sessions.find(session_id), prompt, meta)

    async def cancel(self, session_id: str, **_meta: Any) -> None:
        await self.prompts.cancel(self.sessions.get(session_id))
