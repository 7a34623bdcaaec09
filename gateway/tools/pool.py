"""MCP connections that belong to a thread: ACP ``session/new`` names ``mcpServers`` for its
session; they are connected for that session and closed with it.

Bounded: at most ``max_threads`` threads hold connections (the least recently used is closed
first) and a thread unused for ``idle_timeout_s`` is closed. Owner tasks live in the task group
the pool is started in.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

import anyio
from anyio.abc import TaskGroup

from ...contracts.client_errors import ClientError
from .mcp_specs import McpOptions, McpServerSpec, ToolSourceError

if TYPE_CHECKING:
    from .mcp import McpTools

log = logging.getLogger("loopgate.tools")


class _Thread:
    """One thread's connections; ``lock`` serialises opening and closing them."""

    def __init__(self, now: float) -> None:
        self.specs: tuple[McpServerSpec, ...] = ()
        self.tools: list[McpTools] = []
        self.last_used = now
        self.lock = anyio.Lock()


class ThreadMcpPool:
    def __init__(
        self,
        options: McpOptions | None = None,
        *,
        max_threads: int = 64,
        idle_timeout_s: float = 1800.0,
        stderr: TextIO | None = None,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        if idle_timeout_s <= 0:
            raise ValueError("idle_timeout_s must be positive")
        self.options = options if options is not None else McpOptions()
        self.max_threads = max_threads
        self.idle_timeout_s = idle_timeout_s
        self._stderr = stderr
        self._clock = clock
        self._threads: OrderedDict[str, _Thread] = OrderedDict()  # least recently used first
        self._tg: TaskGroup | None = None
        # Made in start(): a cancel scope needs a running event loop, a pool may be built
        # before there is one (the app is assembled before the server starts).
        self._reaper: anyio.CancelScope | None = None
        self._closed = False

    async def start(self, task_group: TaskGroup) -> None:
        """Owner tasks and the idle reaper run in ``task_group`` from now on."""
        if self._tg is not None:
            raise RuntimeError("the pool was already started")
        self._tg = task_group
        self._reaper = anyio.CancelScope()
        task_group.start_soon(self._reap, self._reaper, name="mcp-pool-reaper")

    def threads(self) -> list[str]:
        """Threads holding connections, least recently used first."""
        return list(self._threads)

    def touch(self, thread_id: str) -> None:
        """Mark a thread as in use (a long turn should, so idle expiry leaves it alone)."""
        entry = self._threads.get(thread_id)
        if entry is not None:
            entry.last_used = self._clock()
            self._threads.move_to_end(thread_id)

    async def tools_for(self, thread_id: str, specs: Sequence[McpServerSpec]) -> list[McpTools]:
        """The thread's connections to ``specs``: reused while the specs are unchanged and all
        connected, else (re)opened. Raises :class:`ToolSourceError` if any server fails, with
        every failure named; the others are closed again."""
        tg = self._tg
        if tg is None:
            raise RuntimeError("start the pool first")
        wanted = tuple(specs)
        names = [spec.name for spec in wanted]
        dupes = sorted({name for name in names if names.count(name) > 1})
        if dupes:
            raise ClientError(f"two MCP servers are named {dupes[0]!r}")
        while True:
            if self._closed:
                raise ToolSourceError("MCP connections are closing")
            entry = self._threads.get(thread_id)
            if entry is None:
                if not wanted:
                    return []
                entry = self._threads[thread_id] = _Thread(self._clock())
            self.touch(thread_id)
            async with entry.lock:
                if self._threads.get(thread_id) is not entry:
                    continue  # closed while we waited for the lock: start over
                if entry.specs == wanted and all(t.connected for t in entry.tools):
                    return list(entry.tools)
                await _close_all(entry.tools)
                entry.specs, entry.tools = (), []
                if not wanted:
                    self._drop(thread_id, entry)
                    return []
                try:
                    entry.tools = await self._open(tg, wanted)
                except BaseException:
                    self._drop(thread_id, entry)
                    raise
                entry.specs = wanted
                tools = list(entry.tools)
            self._evict(keep=thread_id)
            return tools

    async def close_thread(self, thread_id: str) -> None:
        entry = self._threads.pop(thread_id, None)
        if entry is not None:
            await _close_entry(entry)

    async def expire_idle(self) -> list[str]:
        """Close threads unused for ``idle_timeout_s``; returns their ids."""
        deadline = self._clock() - self.idle_timeout_s
        expired = [tid for tid, entry in self._threads.items() if entry.last_used <= deadline]
        async with anyio.create_task_group() as tg:
            for tid in expired:
                entry = self._threads.pop(tid)
                tg.start_soon(_close_entry, entry)
        return expired

    async def aclose(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        entries = list(self._threads.values())
        self._threads.clear()
        with anyio.CancelScope(shield=True):  # every close inside is bounded
            async with anyio.create_task_group() as tg:
                for entry in entries:
                    tg.start_soon(_close_entry, entry)

    # --- internals ----------------------------------------------------------------------------

    async def _open(self, tg: TaskGroup, specs: tuple[McpServerSpec, ...]) -> list[McpTools]:
        # The SDK is imported with the first connection: most gateways never make one.
        from .mcp import McpTools, start_all

        tools = [McpTools(spec, self.options, stderr=self._stderr) for spec in specs]
        try:
            await start_all(tools, tg)
        except BaseException:
            # Closed in the background: a server that failed may take its grace period to go.
            tg.start_soon(_close_all, tools)
            raise
        return tools

    def _drop(self, thread_id: str, entry: _Thread) -> None:
        if self._threads.get(thread_id) is entry:
            del self._threads[thread_id]

    def _evict(self, keep: str) -> None:
        tg = self._tg
        assert tg is not None
        while len(self._threads) > self.max_threads:
            oldest = next((tid for tid in self._threads if tid != keep), None)
            if oldest is None:
                return
            log.info("closing the MCP servers of thread %s (over %d)", oldest, self.max_threads)
            tg.start_soon(_close_entry, self._threads.pop(oldest))

    async def _reap(self, scope: anyio.CancelScope) -> None:
        interval = min(max(self.idle_timeout_s / 4, 0.05), 60.0)
        with scope:
            while True:
                await anyio.sleep(interval)
                await self.expire_idle()


async def _close_entry(entry: _Thread) -> None:
    # Shielded: an entry is out of the pool by now, so a cancelled close would leak its servers.
    # Bounded: the lock's holder waits at most a connect timeout, each close a close timeout.
    with anyio.CancelScope(shield=True):
        async with entry.lock:
            await _close_all(entry.tools)
            entry.specs, entry.tools = (), []


async def _close_all(tools: Sequence[McpTools]) -> None:
    async with anyio.create_task_group() as tg:
        for one in tools:
            tg.start_soon(one.aclose)
