"""MCP (Model Context Protocol) server: runs as tools over stdio (`loopgate mcp`) and streamable
HTTP (`/mcp`), through the official `mcp` SDK; runs' event logs as resources."""

from loopgate.adapters.mcp.adapter import ADAPTER, McpAdapter
from loopgate.adapters.mcp.projector import Answer, McpProjector, Progress

__all__ = ["ADAPTER", "Answer", "McpAdapter", "McpProjector", "Progress"]
