"""``loopgate serve --reload``: the agents rebuilt in place when a file they are built from
changes (the config file, a Python loop or tools module, a system prompt file).

In the process, not by restarting it: the hub and its journal stay, so finished runs stay
readable (a memory journal's would go with the process), and a run going when its agent is
rebuilt finishes on the loop it started on, which is closed once its runs are over. Settings
that are not the agents' (port, journal, credentials, limits) take effect on a restart.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from starlette.applications import Starlette

from ...contracts.loop import RunContext
from ..config_file import FIELDS, config_path, settings_for_command
from ..plugs.python import python_loop
from ..plugs.reference import RunScope
from ..plugs.source import LoopProducer, LoopSource
from ..settings import Settings
from ..user_modules import relative_path
from .build import build_agents
from .spec import AgentSpec
from .table import Agents
from .watch import Files, forget_modules, mark, marks, watched_files

if TYPE_CHECKING:
    from ..hub import Hub, Run

# How often the watched files are looked at: a save is picked up within this (and a rebuild).
POLL_S = 0.25
# The settings agents are built from (an agent table's keys, and the bounds of their loops and
# tools): the ones a reload applies. The others shape the server, the hub or the endpoints,
# built once (max_line_bytes and max_run_bytes bound the endpoints and ingest too).
RELOADED = frozenset(
    {
        *(name for name in AgentSpec.__struct_fields__ if name not in ("description", "default")),
        "agents",
        "workspace",
        "loop_connect_timeout_s",
        "loop_first_event_timeout_s",
        "loop_idle_timeout_s",
        "loop_cancel_grace_s",
        "loop_restart_max_s",
        "loop_stderr_max_line_bytes",
        "loop_stderr_bytes_per_s",
        "loop_stderr_burst_bytes",
        "loop_stderr_report_s",
        "permission_timeout_s",
        "mcp_connect_timeout_s",
        "mcp_call_timeout_s",
        "mcp_max_threads",
        "mcp_idle_timeout_s",
    }
)
# Where ``loopgate serve`` says where runs go (gateway/server.py): its operator reads it.
log = logging.getLogger("uvicorn.error")


def reload_on_change(
    app: Starlette, settings: Settings, *, config: str | None, flags: Mapping[str, Any]
) -> Reloader:
    """Watch what ``app``'s agents are built from while it serves; ``config`` and ``flags`` as
    ``serve`` was given them, to read the settings again as it did."""
    telemetry = app.state.telemetry
    scope = telemetry.scope if telemetry is not None else None
    reloader = Reloader(app.state.hub, settings, config=config, flags=flags, scope=scope)
    serve = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Any]:
        # Around the hub's: the first roster's loops are started before it serves.
        async with reloader.running(), serve(app) as state:
            yield state

    app.router.lifespan_context = lifespan
    return reloader


class AgentSource(LoopSource):
    """An agent's runs under ``--reload``. Hub.start awaits (the journal, quotas) between
    choosing the agent and taking a producer from it: a start that chose it just before a
    reload and comes back after its loop was closed goes to the agent now serving its name."""

    def __init__(self, source: LoopSource, name: str) -> None:
        super().__init__(source.loop, source.guards, source.loop_config)
        self.name = name
        self.closed = False

    def producer(self, hub: Hub, run: Run, prepared: Any) -> LoopProducer:
        if not self.closed:
            return super().producer(hub, run, prepared)
        successor = hub.roster.by_name.get(self.name) if hub.roster is not None else None
        if successor is not None:
            return successor.source.producer(hub, run, prepared)
        removed = LoopSource(python_loop(removed_agent(self.name), self.name), self.guards, {})
        return removed.producer(hub, run, prepared)


def removed_agent(name: str) -> Any:
    message = f"agent {name!r} was removed from the configuration as this run started"

    async def loop(ctx: RunContext) -> AsyncIterator[dict[str, Any]]:
        yield {"kind": "error", "data": {"message": message, "phase": "loop"}}
        completion = {"status": "failed", "reason": "agent_removed", "message": message}
        yield {"kind": "completion", "data": completion}

    return loop


class KeptAgents(Agents):
    """A roster whose loops its keeper task starts and closes (Reloader.keep), not the hub: a
    loop's start may enter a task group, which only the task that entered it may leave, and a
    replaced roster is closed long before the hub stops."""

    def __init__(self, roster: Agents) -> None:
        super().__init__(list(roster), roster.default.name)
        self.replaced = False

    async def start(self) -> None:
        """The hub's call: its keeper started it."""

    async def aclose(self) -> None:
        """The hub's call: its keeper closes it."""

    async def open(self) -> None:
        await super().start()


class Reloader:
    """Polls the files the agents are built from; on a change, builds the agents again and
    puts them in the hub's place of the old ones, whose loops close once their runs end."""

    def __init__(
        self,
        hub: Hub,
        settings: Settings,
        *,
        config: str | None,
        flags: Mapping[str, Any],
        scope: RunScope | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        assert hub.roster is not None, "a hub serving agents"
        self.hub = hub
        self.settings = settings  # what the agents now serving were built from
        self.read = settings  # the settings last read, applied or not
        self.given = config
        self.config = config_path(config, os.environ)
        self.flags = dict(flags)
        self.scope = scope
        self.poll_s = poll_s
        self.files: Files = watched_files(settings, self.config)
        self.roster = self.kept(hub.roster)
        hub.roster = self.roster
        self._stopping = False
        self._woken: anyio.Event | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    def kept(self, roster: Agents) -> KeptAgents:
        for agent in roster:
            agent.source = source = AgentSource(agent.source, agent.name)
            source.on_run_end = self.wake
        return KeptAgents(roster)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Start the first roster, and watch until the block ends; then close every roster."""
        self._woken = anyio.Event()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await tg.start(self.keep, self.roster)
            watching = anyio.CancelScope()
            tg.start_soon(self.watch, watching)
            try:
                yield
            finally:
                watching.cancel()
                self._stopping = True
                self.wake()

    def wake(self) -> None:
        """Something the keepers wait for happened: a run ended, a roster was replaced, the
        gateway stops."""
        woken = self._woken
        if woken is not None:
            self._woken = anyio.Event()
            woken.set()

    async def _changed(self) -> None:
        assert self._woken is not None
        await self._woken.wait()

    async def keep(
        self,
        roster: KeptAgents,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start ``roster``'s loops; once it is replaced, close each agent's loop when the runs
        it has going are over (at once when the gateway stops: the hub ended them)."""
        await roster.open()
        task_status.started()
        while not (roster.replaced or self._stopping):
            await self._changed()
        for agent in reversed(list(roster)):  # as Agents.aclose: the last started first
            source = agent.source
            assert isinstance(source, AgentSource)
            while source.running and not self._stopping:
                await self._changed()
            source.closed = True
            try:
                await agent.loop.aclose()
            except Exception:
                log.exception("closing the loop of agent %s failed", agent.name)

    async def watch(self, scope: anyio.CancelScope) -> None:
        with scope:
            seen = marks(self.files)
            while True:
                await anyio.sleep(self.poll_s)
                now = marks(self.files)
                changed = [path for path, was in seen.items() if now[path] != was]
                if changed:
                    await self.reload(changed)
                    # Marks from before the reload: a save during it is a change next time.
                    seen = {path: now[path] if path in now else mark(path) for path in self.files}

    async def reload(self, changed: list[str]) -> None:
        """Build the agents again (``changed``: the files that changed); a configuration that
        does not build is logged, and the agents serving stay."""
        forget_modules({path: self.files[path] for path in changed})
        try:
            read = settings_for_command(self.given, os.environ, self.flags)
            self.unapplied(read)
            settings = copy.copy(self.settings)
            for name in RELOADED:
                setattr(settings, name, getattr(read, name))
            self.files = watched_files(settings, self.config)
            roster = self.kept(build_agents(settings, scope=self.scope))
        except ValueError as exc:
            # A config file's problems and a module's import error: a line each, file:line.
            for problem in str(exc).splitlines():
                log.warning("not reloaded: %s", problem)
            log.warning("the agents stay as they were until the next change")
            return
        except Exception:
            log.exception("not reloaded: building the agents failed; they stay as they were")
            return
        assert self._tg is not None
        try:
            await self._tg.start(self.keep, roster)
        except Exception:
            log.exception("not reloaded: the agents' loops did not start; they stay as they were")
            return
        old, self.roster, self.settings = self.roster, roster, settings
        self.hub.roster = roster
        old.replaced = True
        self.wake()
        names = ", ".join(relative_path(path) for path in changed)
        log.info("reloaded agents: %s (%s changed)", ", ".join(roster.names()), names)

    def unapplied(self, read: Settings) -> None:
        """Warn of settings changed since last read that a reload does not apply."""
        changed = [
            name
            for name in FIELDS
            if name not in RELOADED and getattr(read, name) != getattr(self.read, name)
        ]
        self.read = read
        if changed:
            log.warning(
                "%s changed: not applied by a reload; restart the gateway for that",
                ", ".join(changed),
            )
