"""The reference loop's tools for each run: the configured sources (demo tools, function
modules, ``--mcp``/``--mcp-url`` servers) plus the MCP servers of the run's thread.

Every MCP connection lives in one pool: the configured servers under a key of their own, shared
by every run, each thread's under the thread. So a server that is down when the gateway starts,
or that goes away later, is connected again by the next run that needs it; until then the runs
that need it fail with its error, and the gateway goes on.

``start`` and ``aclose`` must be called by the same task (the hub's, through the loop's start
and close): the MCP owner tasks live in a task group entered in one and left in the other.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TextIO

import anyio
from anyio.abc import TaskGroup

from ...contracts.client_errors import ClientError
from ..reference.types import ToolExecutor
from .mcp_specs import McpOptions, McpServerSpec, ToolSourceError
from .pool import ThreadMcpPool
from .toolbox import ToolBox

log = logging.getLogger("loopgate.tools")

# The pool's key for the configured servers; no thread id can take it (it has a NUL).
CONFIGURED = "\x00configured"


class ToolSources:
    def __init__(
        self,
        executors: Sequence[ToolExecutor] = (),
        servers: Sequence[McpServerSpec] = (),
        options: McpOptions | None = None,
        *,
        max_threads: int = 64,
        idle_timeout_s: float = 1800.0,
        stderr: TextIO | None = None,
    ) -> None:
        names = [spec.name for spec in servers]
        dupes = sorted({name for name in names if names.count(name) > 1})
        if dupes:
            raise ClientError(f"two MCP servers are named {dupes[0]!r}")
        self.options = options if options is not None else McpOptions()
        self._executors = list(executors)
        self._servers = tuple(servers)
        # One more than asked for: the configured servers hold a place of their own.
        self.pool = ThreadMcpPool(
            self.options, max_threads=max_threads + 1, idle_timeout_s=idle_timeout_s, stderr=stderr
        )
        self._tg: TaskGroup | None = None
        self._plain = ToolBox(self._executors)

    async def start(self) -> None:
        """Connect the configured servers now, so a broken one is in the log at once; runs
        try again when one failed."""
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self.pool.start(self._tg)
        if self._servers:
            try:
                await self.for_thread(CONFIGURED, ())
            except (ToolSourceError, ValueError) as exc:
                log.error("%s; runs that need it will try again", getattr(exc, "message", exc))

    async def aclose(self) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        await self.pool.aclose()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    async def for_thread(self, thread_id: str, servers: Sequence[McpServerSpec]) -> ToolBox:
        """The tools of a run in ``thread_id``: the configured ones plus the thread's own
        servers (connected on first use, kept while unchanged). Raises ToolSourceError (a
        server failed) or ValueError (two sources define one tool name)."""
        if self._tg is None:
            raise RuntimeError("start the tool sources first")
        shared = await self.pool.tools_for(CONFIGURED, self._servers) if self._servers else []
        own = await self.pool.tools_for(thread_id, servers) if thread_id != CONFIGURED else []
        if not shared and not own:
            return self._plain
        return ToolBox([*self._executors, *shared, *own])

    async def close_thread(self, thread_id: str) -> None:
        if thread_id != CONFIGURED:
            await self.pool.close_thread(thread_id)
