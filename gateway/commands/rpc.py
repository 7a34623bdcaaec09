"""``loopgate rpc``: a private gateway serving JSON-RPC 2.0 on stdin/stdout, one message a line.

For clients that spawn a process (editors, scripts). The server is the ``jsonrpc`` adapter's
stdio transport, found in the registry. stdout carries the protocol only: logs and anything
else printed go to stderr. The end of stdin ends the process: this connection's subscriptions
are cancelled and runs still going are stopped (the hub drains).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from .flags import (
    LOOP_SETTINGS,
    add_config_flag,
    add_log_level,
    add_loop_flags,
)

SETTING_FLAGS = (
    *LOOP_SETTINGS,
    "journal",
    "workspace",
    "max_active_runs",
    "max_body_bytes",
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "rpc",
        help="serve JSON-RPC 2.0 on stdin/stdout (one message per line)",
        description="Serve the JSON-RPC API (docs/jsonrpc.md) on stdin/stdout with an "
        "in-process gateway (its loop, or the agents of a config file: -c). Every flag also "
        "reads LOOPGATE_<NAME>; flags win.",
    )
    add_config_flag(p)
    add_loop_flags(p)
    p.add_argument("--journal", help="'memory' (default) or 'sqlite:PATH'")
    p.add_argument("--workspace", help="directory the demo file tools may read and write")
    p.add_argument(
        "--max-active-runs",
        type=int,
        metavar="N",
        help="runs going at once; more are refused (default 1000)",
    )
    p.add_argument(
        "--max-body-bytes", type=int, help="largest message (one line) in bytes (default 1 MiB)"
    )
    p.add_argument("--max-batch", type=int, help="most items in one batch (default 100)")
    add_log_level(p, "warning")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from ..config_file import settings_for_command
    from ..journal import check_journal

    try:
        flags = {k: getattr(args, k) for k in SETTING_FLAGS}
        settings = settings_for_command(getattr(args, "config", None), os.environ, flags)
        check_journal(settings.journal, settings.bus)
        overrides: dict[str, Any] = {}
        if args.max_batch is not None:
            if args.max_batch <= 0:
                raise ValueError(f"max_batch must be positive, got {args.max_batch}")
            overrides["max_batch"] = args.max_batch
    except ValueError as exc:
        # A config file's problems: one line each, all of them.
        for problem in str(exc).splitlines():
            print(f"loopgate rpc: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from .startup import run_async
    from .stdio import reserve_stdout

    return run_async("rpc", serve, settings, overrides, reserve_stdout())


async def serve(settings: Any, overrides: dict[str, Any], protocol_fd: int) -> None:
    import msgspec

    from ...contracts.projector import StdioOptions
    from ..app import endpoint_limits
    from ..registry import stdio_adapter
    from .startup import command_hub
    from .stdio import stdio_streams

    adapter = stdio_adapter("jsonrpc")
    # A message is a line: --max-body-bytes bounds it.
    limits = msgspec.structs.replace(
        endpoint_limits(settings), max_line_bytes=settings.max_body_bytes
    )
    options = StdioOptions(limits=limits, cwd=os.getcwd(), options=overrides)
    read, write = await stdio_streams(protocol_fd, settings.max_body_bytes + 1)
    async with command_hub(settings) as hub:
        await adapter.serve_stdio(hub, options, read, write)
