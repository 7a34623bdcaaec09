"""JSON-RPC 2.0 for automation clients: POST /rpc, WebSocket /rpc/ws, `loopgate rpc` on stdio."""

from .adapter import ADAPTER, JsonRpcAdapter
from .dispatch import Dispatcher
from .limits import RpcLimits
from .methods import METHODS, Method, method_table
from .projector import JsonRpcProjector

__all__ = [
    "ADAPTER",
    "METHODS",
    "Dispatcher",
    "JsonRpcAdapter",
    "JsonRpcProjector",
    "Method",
    "RpcLimits",
    "method_table",
]
