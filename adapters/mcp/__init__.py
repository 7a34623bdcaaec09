"""MCP (Model Context Protocol) server: runs as tools over stdio (`loopgate mcp`) and streamable
HTTP (`/mcp`), through the official `mcp` SDK; runs' event logs as resources."""

from .adapter import ADAPTER, McpAdapter
from .projector import Answer, McpProjector, Progress

__all__ = ["ADAPTER", "Answer", "McpAdapter", "McpProjector", "Progress"]
