"""The ``rpc.discover`` document (OpenRPC 1.2.6), generated from a method table.

Server→client traffic (``run.event``, ``run.end`` notifications and ``run.permission`` requests)
has no place in OpenRPC; it is listed under the ``x-server-messages`` extension.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from loopgate import __version__

from ..shared.rpc_errors import INVALID_PARAMS
from .errors import MESSAGES, SERVER_CODES
from .methods import CallContext, Method, NoParams

OPENRPC_VERSION = "1.2.6"
REF = "#/components/schemas/{name}"

SERVER_MESSAGES = {
    "run.event": {
        "kind": "notification",
        "params": {"subscription": "string", "event": "Envelope {run_id, seq, ts, kind, data}"},
    },
    "run.end": {
        "kind": "notification",
        "params": {
            "subscription": "string",
            "runId": "string",
            "status": "terminal completion status, or null when cut off",
            "lastSeq": "the seq to resume after",
            "reason": "only when not the run's own end: cut_off, error, truncated",
        },
    },
    "run.permission": {
        "kind": "request (WebSocket and stdio only)",
        "params": {
            "subscription": "string",
            "runId": "string",
            "requestId": "string",
            "toolCall": "{id, name, arguments, kind}",
            "options": "decisions the client may choose",
        },
        "result": {"decision": "allow_once | allow_always | reject_once | reject_always"},
    },
}


def _is_struct(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, msgspec.Struct)


def error_entry(code: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"code": code, "message": MESSAGES[code]}
    if code in SERVER_CODES:
        entry["data"] = SERVER_CODES[code]
    return entry


def openrpc_document(methods: Mapping[str, Method]) -> dict[str, Any]:
    types = [m.params for m in methods.values()] + [m.result for m in methods.values()]
    schemas, components = msgspec.json.schema_components(types, ref_template=REF)
    param_schemas = schemas[: len(methods)]
    result_schemas = schemas[len(methods) :]
    entries = []
    for method, param_schema, result_schema in zip(
        methods.values(), param_schemas, result_schemas, strict=True
    ):
        entry: dict[str, Any] = {"name": method.name}
        if method.summary:
            entry["summary"] = method.summary
        if method.description:
            entry["description"] = method.description
        if _is_struct(method.params):
            definition = components[method.params.__name__]
            required = set(definition.get("required", ()))
            entry["params"] = [
                {"name": name, "required": name in required, "schema": schema}
                for name, schema in definition.get("properties", {}).items()
            ]
            entry["paramStructure"] = "either"
        else:
            entry["params"] = [{"name": "params", "required": False, "schema": param_schema}]
            entry["paramStructure"] = "by-position"
        entry["result"] = {"name": "result", "schema": result_schema}
        codes = (INVALID_PARAMS, *method.errors) if method.params is not NoParams else ()
        entry["errors"] = [error_entry(code) for code in dict.fromkeys(codes)]
        if method.streaming:
            entry["x-transports"] = ["websocket", "stdio"]
        entries.append(entry)
    return {
        "openrpc": OPENRPC_VERSION,
        "info": {
            "title": "loopgate JSON-RPC",
            "version": __version__,
            "description": "Runs of an agent loop over JSON-RPC 2.0: POST /rpc, the WebSocket "
            "GET /rpc/ws, and `loopgate rpc` on stdio. See docs/jsonrpc.md.",
        },
        "methods": entries,
        "components": {"schemas": components},
        "x-server-messages": SERVER_MESSAGES,
    }


def with_discover(methods: Mapping[str, Method]) -> dict[str, Method]:
    """``methods`` plus ``rpc.discover``, whose document describes all of them and itself."""
    document: list[msgspec.Raw] = []

    async def discover(ctx: CallContext, params: NoParams) -> msgspec.Raw:
        return document[0]

    table = dict(methods)
    table["rpc.discover"] = Method(
        name="rpc.discover",
        handler=discover,
        result=dict[str, Any],
        summary="This document: the methods, their params, results and errors (OpenRPC).",
    )
    document.append(msgspec.Raw(msgspec.json.encode(openrpc_document(table))))
    return table
