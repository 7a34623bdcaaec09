"""``loopgate acp``: an ACP agent on stdin/stdout for IDEs (Zed, JetBrains, Neovim, acpx).

The agent is the ``acp`` adapter's stdio transport, found in the registry. stdout carries only
protocol messages: the process moves its own stdout to stderr before it starts, so a stray
print or a library's warning cannot corrupt the JSON-RPC stream.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

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

SETTING_FLAGS = (*LOOP_SETTINGS, "journal", "workspace", "max_line_bytes")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "acp",
        help="serve the Agent Client Protocol on stdin/stdout (for IDEs)",
        description="Run loopgate as an ACP agent on stdin/stdout. By default the reference "
        "loop runs in this process (or the agents of a config file: -c); with --server the runs "
        "live in a running `loopgate serve`. Settings also read LOOPGATE_<NAME> (e.g. "
        "LOOPGATE_JOURNAL); flags win. Logs go to stderr.",
    )
    add_config_flag(p)
    p.add_argument("--server", help="attach to a running gateway, e.g. http://127.0.0.1:8000")
    p.add_argument(
        "--agent",
        help="every session runs on this agent (of the config file, or the --server's), and "
        "the IDE is told what it takes (images, audio); default: sessions choose",
    )
    add_client_token_flags(p)
    add_loop_flags(p)
    p.add_argument(
        "--journal", help="'memory' (default) or 'sqlite:PATH' (sessions survive restarts)"
    )
    p.add_argument("--workspace", help="directory the demo file tools may read and write")
    p.add_argument("--max-line-bytes", type=int, help="longest JSON-RPC line accepted")
    p.add_argument(
        "--context-size",
        type=int,
        help="the model's context window in tokens; enables usage_update notifications",
    )
    add_log_level(p, "warning")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        overrides = {k: getattr(args, k) for k in SETTING_FLAGS}
        # getattr: a Namespace built by a caller (tests) may predate -c.
        settings = settings_for_command(getattr(args, "config", None), os.environ, overrides)
        check_journal(settings.journal, settings.bus)
        if args.context_size is not None and args.context_size <= 0:
            raise ValueError("--context-size must be positive")
        token = client_token(args, os.environ)
    except ValueError as exc:
        # A config file's problems: one line each, all of them, so one edit can fix them all.
        for problem in str(exc).splitlines():
            print(f"loopgate acp: {problem}", file=sys.stderr)
        return 2
    protocol_out = reserve_stdout()
    return run_async("acp", _serve, args, settings, protocol_out, token)


async def _serve(
    args: argparse.Namespace, settings: Settings, protocol_fd: int, token: str | None
) -> None:
    # Here, not at the top: every command's module is imported to build the parser.
    from ..app import endpoint_limits
    from ..registry import stdio_adapter

    adapter = stdio_adapter("acp")
    read, write = await stdio_streams(protocol_fd, settings.max_line_bytes + 1)
    # getattr: a Namespace built by a caller (tests) may predate --agent.
    agent: dict[str, Any] = {
        "context_size": args.context_size,
        "agent": getattr(args, "agent", None),
    }

    def options() -> StdioOptions:
        limits = endpoint_limits(settings)
        return StdioOptions(limits=limits, version=__version__, cwd=os.getcwd(), options=agent)

    if args.server:
        from ..client import RemoteService

        # The runs live in another gateway, which cannot start this machine's MCP servers.
        agent["mcp_transports"] = ()
        async with RemoteService(args.server, token=token) as service:
            await adapter.serve_stdio(service, options(), read, write)
        return
    from ..reference.tools import DemoTools

    tools = DemoTools(Path(settings.workspace))
    agent["tool_kinds"] = {spec.name: tools.kind(spec.name) for spec in tools.specs()}
    async with command_hub(settings) as hub:
        await adapter.serve_stdio(hub, options(), read, write)
