"""The in-process hub a command runs on, and what the user reads when it cannot start.

A setting that cannot be built into a loop (a ``--loop`` that does not import, a ``--tools``
module with a syntax error, an unreadable ``--system-prompt-file``) is the user's to fix: one
line and exit 2, never the traceback of an event loop.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from ..hub import Hub
    from ..settings import Settings


class StartupError(Exception):
    """The hub could not be built from the settings; the message, one line, is for the user."""


@asynccontextmanager
async def command_hub(settings: Settings) -> AsyncIterator[Hub]:
    """The hub a command serves from, a ValueError of its startup a :class:`StartupError`
    (only its startup's: one raised while serving stays what it is)."""
    # Here, not at the top: every command's module is imported to build the parser.
    from ..app import traced_hub

    async with AsyncExitStack() as stack:
        try:
            hub = await stack.enter_async_context(traced_hub(settings))
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        yield hub


def run_async(command: str, main: Callable[..., Awaitable[int | None]], *args: Any) -> int:
    """``main(*args)`` under anyio: its exit code (None: 0), or 2 with one line on stderr when
    its hub cannot start."""
    try:
        return anyio.run(main, *args) or 0
    except StartupError as exc:
        print(f"loopgate {command}: {exc}", file=sys.stderr)
        return 2
