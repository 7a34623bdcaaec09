"""JSON-RPC 2.0 for automation clients: POST /rpc, WebSocket /rpc/ws, `loopgate rpc` on stdio."""

from loopgate.adapters.jsonrpc.adapter import ADAPTER, JsonRpcAdapter
from loopgate.adapters.jsonrpc.dispatch import Dispatcher
from loopgate.adapters.jsonrpc.limits import RpcLimits
from loopgate.adapters.jsonrpc.methods import METHODS, Method, method_table
from loopgate.adapters.jsonrpc.projector import JsonRpcProjector

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
