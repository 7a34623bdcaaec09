"""``loopgate mcp``: an MCP server on stdin/stdout for desktop assistants (Claude Desktop,
Cursor, VS Code) and any MCP client that starts its servers as processes.

The server is the ``mcp`` adapter's stdio transport, found in the registry: runs as tools
(``run``, ``get_run``, ``list_runs``, ``cancel_run``, and one per agent when several are
served), their event logs as resources. By default the runs live in this process (the
reference loop, the loop the flags name, or the agents of the config file ``-c`` names); with
``--server`` they live in a running ``loopgate serve``. stdout carries protocol messages only:
the process moves its own stdout to stderr first. The end of stdin ends the process once the
calls in flight are answered.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from loopgate import __version__

from ...contracts.projector import StdioOptions
from ..config_file import settings_for_command
from ..journal import check_journal
from ..settings import Settings
from .flags import (
    LOOP_SETTINGS,
    add_client_token_flags,
    add_config_flag,
    add_log_level,
    add_loop_flags,
    client_token,
)
from .startup import command_hub, run_async
from .stdio import reserve_stdout, stdio_streams

SETTING_FLAGS = (*LOOP_SETTINGS, "journal", "workspace", "max_active_runs", "max_line_bytes")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "mcp",
        help="serve MCP (Model Context Protocol) on stdin/stdout (for Claude Desktop, Cursor…)",
        description="Run loopgate as an MCP server on stdin/stdout: runs as tools, their event "
        "logs as resources (docs/mcp.md). By default the runs live in this process; with "
        "--server they live in a running `loopgate serve`. Settings also read "
        "LOOPGATE_<NAME> (e.g. LOOPGATE_JOURNAL); flags win. Logs go to stderr.",
    )
    add_config_flag(p)
    p.add_argument("--server", help="attach to a running gateway, e.g. http://127.0.0.1:8000")
    add_client_token_flags(p)
    add_loop_flags(p)
    p.add_argument("--journal", help="'memory' (default) or 'sqlite:PATH' (runs survive restarts)")
    p.add_argument("--workspace", help="directory the demo file tools may read and write")
    p.add_argument(
        "--max-active-runs",
        type=int,
        metavar="N",
        help="runs going at once; more are refused (default 1000)",
    )
    p.add_argument("--max-line-bytes", type=int, help="longest JSON-RPC line accepted")
    add_log_level(p, "warning")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        flags = {k: getattr(args, k) for k in SETTING_FLAGS}
        settings = settings_for_command(args.config, os.environ, flags)
        check_journal(settings.journal, settings.bus)
        token = client_token(args, os.environ)
    except ValueError as exc:
        print(f"loopgate mcp: {exc}", file=sys.stderr)
        return 2
    protocol_out = reserve_stdout()
    return run_async("mcp", _serve, args.server, settings, protocol_out, token)


async def _serve(
    server: str | None, settings: Settings, protocol_fd: int, token: str | None
) -> None:
    # Here, not at the top: every command's module is imported to build the parser.
    from ..app import endpoint_limits
    from ..registry import stdio_adapter

    adapter = stdio_adapter("mcp")
    read, write = await stdio_streams(protocol_fd, settings.max_line_bytes + 1)
    options = StdioOptions(limits=endpoint_limits(settings), version=__version__, cwd=os.getcwd())
    if server:
        from ..client import RemoteService

        async with RemoteService(server, token=token) as service:
            await adapter.serve_stdio(service, options, read, write)
        return
    async with command_hub(settings) as hub:
        await adapter.serve_stdio(hub, options, read, write)
