"""``loopgate acp``: an ACP agent on stdin/stdout for IDEs (Zed, JetBrains, Neovim, acpx).

stdout carries only protocol messages: the process moves its own stdout to stderr before it
starts, so a stray print or a library's warning cannot corrupt the JSON-RPC stream.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import stat
import sys
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio

from gateway.commands.flags import (
    LOOP_SETTINGS,
    add_client_token_flags,
    add_log_level,
    add_loop_flags,
    client_token,
)
from gateway.settings import load_settings

SETTING_FLAGS = (*LOOP_SETTINGS, "journal", "workspace", "max_line_bytes")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "acp",
        help="serve the Agent Client Protocol on stdin/stdout (for IDEs)",
        description="Run loopgate as an ACP agent on stdin/stdout. By default the reference "
        "loop runs in this process; with --server the runs live in a running `loopgate serve`. "
        "Settings also read LOOPGATE_<NAME> (e.g. LOOPGATE_JOURNAL); flags win. Logs go to "
        "stderr.",
    )
    p.add_argument("--server", help="attach to a running gateway, e.g. http://127.0.0.1:8000")
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
        settings = load_settings(os.environ, {k: getattr(args, k) for k in SETTING_FLAGS})
        if args.context_size is not None and args.context_size <= 0:
            raise ValueError("--context-size must be positive")
        token = client_token(args, os.environ)
    except ValueError as exc:
        print(f"loopgate acp: {exc}", file=sys.stderr)
        return 2
    protocol_out = _reserve_stdout()
    anyio.run(_serve, args, settings, protocol_out, token)
    return 0


def _reserve_stdout() -> int:
    """Keep the real stdout for the protocol; everything else written to fd 1 goes to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_fd


async def _serve(args: argparse.Namespace, settings: Any, protocol_fd: int, token: str | None):
    from adapters.acp.agent import AcpAgent, AgentOptions
    from adapters.acp.rpc import NdjsonTransport
    from adapters.acp.server import serve_connection

    reader, writer = await _stdio_streams(protocol_fd, settings.max_line_bytes + 1)
    transport = NdjsonTransport(
        reader, writer, settings.max_line_bytes, max_depth=settings.max_json_depth
    )
    options: dict[str, Any] = {
        "version": _version(),
        "context_size": args.context_size,
        "default_cwd": os.getcwd(),
    }
    if args.server:
        from gateway.remote import RemoteService

        # The runs live in another gateway, which cannot start this machine's MCP servers.
        options["mcp_transports"] = ()
        async with RemoteService(args.server, token=token) as service:
            await serve_connection(AcpAgent(service, AgentOptions(**options)), transport)
        return
    from gateway.app import traced_hub
    from gateway.loop.tools import DemoTools

    tools = DemoTools(Path(settings.workspace))
    options["tool_kinds"] = {spec.name: tools.kind(spec.name) for spec in tools.specs()}
    async with traced_hub(settings) as hub:
        await serve_connection(AcpAgent(hub, AgentOptions(**options)), transport)


async def _stdio_streams(
    protocol_fd: int, limit: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    source: Any = sys.stdin
    if not _is_pipe_like(sys.stdin.fileno()):
        # stdin is a regular file (``loopgate acp < requests.jsonl``), which asyncio cannot
        # watch: a thread copies it into a pipe, whose reading end is watched instead.
        source = _pipe_from_thread(sys.stdin.buffer)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    out = os.fdopen(protocol_fd, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    except ValueError:
        return reader, _FileWriter(out)  # type: ignore[return-value]
    writer = asyncio.StreamWriter(transport, protocol, None, loop)  # type: ignore[arg-type]
    return reader, writer


class _FileWriter:
    """stdout redirected to a regular file: plain blocking writes (a file never stalls long)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def write(self, data: bytes) -> None:
        self.out.write(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.out.close()


def _is_pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _pipe_from_thread(source: Any) -> Any:
    """The reading end of a pipe a thread fills from ``source``. The pipe is the back-pressure:
    the thread blocks while the agent is not reading, so the file is never read into memory
    ahead of the agent."""
    read_fd, write_fd = os.pipe()

    def copy() -> None:
        with os.fdopen(write_fd, "wb", buffering=0) as sink:
            try:
                while chunk := source.read1(65536):
                    sink.write(chunk)
            except (BrokenPipeError, ValueError):
                pass  # the agent stopped reading: it is exiting

    threading.Thread(target=copy, daemon=True).start()
    return os.fdopen(read_fd, "rb", buffering=0)


def _version() -> str:
    try:
        return version("loopgate")
    except PackageNotFoundError:
        return "0.0.0"
