"""ACP (Agent Client Protocol): loopgate as an agent for IDEs, over stdio and WebSocket."""

from .adapter import ADAPTER, AcpAdapter

__all__ = ["ADAPTER", "AcpAdapter"]
