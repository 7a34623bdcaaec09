"""What an ACP agent is configured with (:class:`AgentOptions`), the protocol versions it
speaks, and the client's end of its connection (:class:`Peer`)."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from ...contracts.outbound import OutboundPolicy

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})


class AgentOptions(msgspec.Struct, frozen=True, kw_only=True):
    name: str = "loopgate"
    version: str = "0.1.0"
    # Tool name → ACP tool kind, from the tools' own metadata (in-process loop).
    tool_kinds: dict[str, str] = msgspec.field(default_factory=dict)
    context_size: int | None = None  # model context window: enables usage_update
    default_cwd: str = "/"
    max_sessions: int = 1024  # per connection; the least recently used idle ones go first
    max_prompt_chars: int = 1_000_000
    max_runs_per_session: int = 1000  # session/load replays at most this many runs
    list_scan_runs: int = 1000  # session/list looks at this many recent runs (and threads)
    list_page_size: int = 100
    # The MCP transports of session/new ``mcpServers`` this agent takes: "stdio" has the
    # gateway start a program, so it is for clients that started the gateway themselves.
    mcp_transports: tuple[str, ...] = ("stdio", "http")
    # The URLs of http MCP servers this agent contacts for its client; None: any (a client
    # that started the gateway itself). Over the network, the operator's allowed_outbound.
    mcp_outbound: OutboundPolicy | None = None
    # The agent every session of this connection runs on (``/agents/NAME/acp``, ``loopgate
    # acp --agent NAME``); None: each session chooses among the gateway's agents.
    agent: str | None = None


class Peer(Protocol):
    """The client end of the connection (``acp.connection.Connection`` fits)."""

    async def send_notification(self, method: str, params: Any = None) -> None: ...

    async def send_request(self, method: str, params: Any = None) -> Any: ...
