"""``loopgate rpc``: a private gateway serving JSON-RPC 2.0 on stdin/stdout, one message a line.

For clients that spawn a process (editors, scripts). stdout carries the protocol only: logs and
anything else printed go to stderr. The end of stdin ends the process: this connection's
subscriptions are cancelled and runs still going are stopped (the hub drains).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, BinaryIO

from gateway.commands.flags import LOOP_SETTINGS, add_log_level, add_loop_flags

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
        "in-process gateway. Every flag also reads LOOPGATE_<NAME>; flags win.",
    )
    add_loop_flags(p)
    p.add_argument("--journal", help="'memory' (default) or 'sqlite:PATH'")
    p.add_argument("--workspace", help="directory the demo file tools may read and write")
    p.add_argument("--max-active-runs", type=int)
    p.add_argument(
        "--max-body-bytes", type=int, help="largest message (one line) in bytes (default 1 MiB)"
    )
    p.add_argument("--max-batch", type=int, help="most items in one batch (default 100)")
    add_log_level(p, "warning")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import anyio

    from gateway.settings import load_settings

    try:
        settings = load_settings(os.environ, {k: getattr(args, k) for k in SETTING_FLAGS})
        overrides: dict[str, Any] = {}
        if args.max_batch is not None:
            overrides["max_batch"] = args.max_batch
        from adapters.jsonrpc.limits import RpcLimits

        limits = RpcLimits(
            max_message_bytes=settings.max_body_bytes,
            write_timeout_s=settings.write_timeout_s,
            max_json_depth=settings.max_json_depth,
            max_batch_response_bytes=settings.max_batch_response_bytes,
            **overrides,
        )
    except ValueError as exc:
        print(f"loopgate rpc: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # The protocol owns the real stdout; a stray print anywhere must not corrupt it.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    sys.stdout = sys.stderr
    try:
        anyio.run(serve, settings, limits, sys.stdin.buffer, protocol_out)
    finally:
        protocol_out.close()
    return 0


async def serve(settings: Any, limits: Any, stdin: BinaryIO, stdout: BinaryIO) -> None:
    import anyio

    from adapters.jsonrpc.dispatch import Dispatcher
    from adapters.jsonrpc.stdio import serve_lines
    from gateway.app import traced_hub

    reader = anyio.wrap_file(stdin)

    def write_all(data: bytes) -> None:
        stdout.write(data)
        stdout.flush()

    async def write(data: bytes) -> None:
        await anyio.to_thread.run_sync(write_all, data)

    async with traced_hub(settings) as hub:
        await serve_lines(Dispatcher(hub, limits), reader.read1, write)
