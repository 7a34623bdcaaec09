"""ACP (Agent Client Protocol): loopgate as an agent for IDEs, over stdio and WebSocket."""

from loopgate.adapters.acp.adapter import ADAPTER, AcpAdapter

__all__ = ["ADAPTER", "AcpAdapter"]
