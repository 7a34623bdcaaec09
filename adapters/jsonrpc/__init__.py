"""JSON-RPC 2.0 for automation clients: POST /rpc, WebSocket /rpc/ws, `loopgate rpc` on stdio."""

from adapters.jsonrpc.adapter import ADAPTER, JsonRpcAdapter
from adapters.jsonrpc.dispatch import Dispatcher
from adapters.jsonrpc.limits import RpcLimits
from adapters.jsonrpc.methods import METHODS, Method, method_table
from adapters.jsonrpc.projector import JsonRpcProjector

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
