"""What an MCP server of the reference loop is: its spec (a command or a URL), how long to
wait for it, and the error when it cannot be had.

Apart from gateway.tools.mcp, which talks to servers through the ``mcp`` SDK: the settings,
the CLI and ACP sessions describe servers without importing the SDK (half a second of every
gateway process's start), which is loaded when a server is first connected.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from ...contracts.client_errors import ClientError

# Launchers whose first plain argument names the server better than the launcher does.
_LAUNCHERS = frozenset(
    {"npx", "bunx", "pnpx", "uvx", "pipx", "node", "deno", "bun", "python", "python3", "uv"}
)


class ToolSourceError(Exception):
    """A tool source could not be had. ``message`` names the source and the cause in plain
    words, fit for clients; details (if any) go to the log."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class McpServerSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One MCP server: a command to run (stdio) or a streamable HTTP endpoint (``url``)."""

    name: str
    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    # Merged over the SDK's safe defaults (PATH, HOME, …); the parent's other variables are not
    # inherited, so secrets in our environment do not leak into a server by accident.
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ClientError("an MCP server needs a name")
        if (self.command is None) == (self.url is None):
            raise ClientError(f"MCP server {self.name!r}: give either a command or a url")
        if self.command is not None and not self.command.strip():
            raise ClientError(f"MCP server {self.name!r}: the command is empty")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ClientError(f"MCP server {self.name!r}: not an http(s) URL: {self.url!r}")
            if self.env or self.args or self.cwd:
                raise ClientError(f"MCP server {self.name!r}: args, env and cwd need a command")
        elif self.headers:
            raise ClientError(f"MCP server {self.name!r}: headers need a url")

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @classmethod
    def from_command(cls, command_line: str, *, name: str | None = None) -> McpServerSpec:
        """``"npx -y @modelcontextprotocol/server-everything"`` → a stdio server (shlex rules)."""
        try:
            argv = shlex.split(command_line)
        except ValueError as exc:
            raise ClientError(f"cannot parse MCP server command {command_line!r}: {exc}") from None
        if not argv:
            raise ClientError("the MCP server command is empty")
        return cls(name=name or _name_from_argv(argv), command=argv[0], args=argv[1:])

    @classmethod
    def from_url(
        cls, url: str, *, name: str | None = None, headers: Mapping[str, str] | None = None
    ) -> McpServerSpec:
        return cls(name=name or urlsplit(url).hostname or url, url=url, headers=dict(headers or {}))

    @classmethod
    def from_acp(cls, entry: Mapping[str, Any]) -> McpServerSpec:
        """One entry of ACP ``session/new`` ``mcpServers``."""
        if not isinstance(entry, Mapping):
            raise ClientError("an mcpServers entry must be an object")
        kind = entry.get("type", "stdio")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ClientError("an mcpServers entry needs a name")
        if kind == "sse":
            raise ClientError("sse MCP servers are not supported")
        if kind == "http":
            url = entry.get("url")
            if not isinstance(url, str):
                raise ClientError(f"MCP server {name!r}: url must be a string")
            return cls(name=name, url=url, headers=_pairs(entry.get("headers"), name, "headers"))
        if kind != "stdio":
            raise ClientError(f"MCP server {name!r}: unknown transport type {kind!r}")
        command = entry.get("command")
        args = entry.get("args", [])
        if not isinstance(command, str):
            raise ClientError(f"MCP server {name!r}: command must be a string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ClientError(f"MCP server {name!r}: args must be a list of strings")
        return cls(name=name, command=command, args=args, env=_pairs(entry.get("env"), name, "env"))


class McpOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How long to wait for an MCP server, and how to greet it."""

    connect_timeout_s: float = 10.0  # spawn/connect, initialize and tools/list together
    call_timeout_s: float = 60.0
    close_timeout_s: float = 5.0  # before the owner task is cancelled; the SDK's own
    # process shutdown (stdin close, SIGTERM, SIGKILL) is bounded on top of it.
    # "auto" probes the 2026 ``server/discover`` and falls back to ``initialize``.
    protocol: Literal["auto", "legacy"] = "auto"


def _pairs(value: Any, server: str, field: str) -> dict[str, str]:
    """ACP's ``[{name, value}]`` lists (env, headers) as a dict."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ClientError(f"MCP server {server!r}: {field} must be a list of {{name, value}}")
    out: dict[str, str] = {}
    for item in value:
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("value"), str)
        ):
            raise ClientError(f"MCP server {server!r}: {field} must be a list of {{name, value}}")
        out[item["name"]] = item["value"]
    return out


def _name_from_argv(argv: list[str]) -> str:
    command = PurePath(argv[0]).name
    if command in _LAUNCHERS:
        for arg in argv[1:]:
            if not arg.startswith("-") and arg not in ("run", "exec", "x"):
                # "@scope/server-x@1.2" → "server-x"; "server.py" → "server"
                base = arg.rsplit("/", 1)[-1].split("@", 1)[0] or arg
                return PurePath(base).stem or base
    return command
