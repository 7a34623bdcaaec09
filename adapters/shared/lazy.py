"""Modules an endpoint needs only once a client asks for it, imported then.

The protocol SDKs behind ``/mcp`` (``mcp``) and ``/acp`` (``acp``, through its pydantic schema)
take about half a second each to import: every gateway process would pay it at start, for
endpoints most deployments never see a request on. The first request imports them in a worker
thread, so the event loop goes on serving every other stream meanwhile. (What they add to the
heap is not in the start-up heap that ``loopgate serve`` freezes: full collections scan it.)
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType

import anyio


async def imported(name: str) -> ModuleType:
    """The module ``name``, imported in a worker thread if it is not yet."""
    module = sys.modules.get(name)
    if module is None:
        module = await anyio.to_thread.run_sync(import_module, name)
    return module
