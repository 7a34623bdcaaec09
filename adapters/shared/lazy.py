"""Modules an endpoint needs only once a client asks for it, imported then.

The protocol SDKs behind ``/mcp`` (``mcp``) and ``/acp`` (``acp``, through its pydantic schema)
take about half a second each to import: every gateway process would pay it at start, for
endpoints most deployments never see a request on. The first request imports them in a worker
thread, so the event loop goes on serving every other stream meanwhile. (What they add to the
heap is not in the start-up heap that ``loopgate serve`` freezes: full collections scan it.)

A module is in ``sys.modules`` from the moment its import *starts*: a request that took it from
there while the worker thread was still running it got a half-initialised module (50 first
clients of ``/acp`` lost 32 connections that way). So the module is the one ``import_module``
returned, never ``sys.modules``'s, and the requests that arrive during the import wait for it.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

import anyio


class LazyModule:
    """The module ``name``, imported once, by its first user, in a worker thread; the users
    that come meanwhile wait for that import. One per endpoint (it belongs to its app)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._module: ModuleType | None = None
        self._lock = anyio.Lock()

    async def get(self) -> ModuleType:
        if self._module is None:
            async with self._lock:
                if self._module is None:
                    self._module = await anyio.to_thread.run_sync(import_module, self.name)
        return self._module
