"""The OpenAPI 3.1 document of the gateway: each describing adapter's paths and schemas (the
native API's: adapters/native/openapi.py), the gateway's own endpoints, and the bearer token's
security scheme when the gateway has one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from loopgate import __version__

from ...adapters.shared.problem import PROBLEM_TYPE
from ...contracts.projector import Adapter, describes_http
from .. import health
from ..health import READY_PATH, Health, Readiness
from ..query_token import event_stream

log = logging.getLogger("loopgate.apidocs")

OPENAPI_VERSION = "3.1.0"
REF = "#/components/schemas/{name}"
DESCRIPTION = (
    "loopgate's own HTTP API: start runs of an agent loop, watch their events as server-sent "
    "events (resumable with `Last-Event-ID`), cancel, steer and answer them, push events from "
    "your own loop, and record threads. Errors are RFC 9457 problem bodies "
    "(`application/problem+json`) whose `detail` says what was wrong. The other protocols "
    "(AG-UI, JSON-RPC, ACP, MCP, OpenAI, Vercel) are described in their own docs; JSON-RPC "
    "also by `rpc.discover`."
)
TAGS = [
    {"name": "Runs", "description": "Start, list and inspect runs; cancel, steer, answer them."},
    {"name": "Events", "description": "A run's event envelopes as server-sent events."},
    {"name": "Ingest", "description": "Events from a loop that runs on its own."},
    {"name": "Threads", "description": "Threads recorded before (or besides) their runs."},
    {"name": "Gateway", "description": "The gateway itself: liveness and this description."},
]
BEARER = "bearerToken"
QUERY_TOKEN = "queryToken"
SECURITY_SCHEMES = {
    BEARER: {
        "type": "http",
        "scheme": "bearer",
        "description": "The gateway's token (`--token-file`, `LOOPGATE_TOKEN`).",
    },
    QUERY_TOKEN: {
        "type": "apiKey",
        "in": "query",
        "name": "token",
        "description": "The same token as `?token=`, only where a browser cannot send a header: "
        "WebSocket upgrades and GET of an event stream.",
    },
}
UNAUTHORIZED = {
    "description": "no token, or a wrong one (`Authorization: Bearer <token>`)",
    "content": {PROBLEM_TYPE: {"schema": {"$ref": REF.format(name="Problem")}}},
}


def gateway_paths() -> dict[str, Any]:
    def get(operation_id: str, summary: str, description: str, ok: dict[str, Any]) -> Any:
        return {
            "get": {
                "operationId": operation_id,
                "tags": ["Gateway"],
                "summary": summary,
                "description": description,
                "responses": {"200": ok},
            }
        }

    return {
        health.PATH: get(
            "health",
            "Liveness",
            "Whether the gateway answers, and which adapters it serves. Open without a token.",
            {
                "description": "the gateway is up",
                "content": {"application/json": {"schema": {"$ref": REF.format(name="Health")}}},
            },
        ),
        READY_PATH: {
            "get": {
                "operationId": "ready",
                "tags": ["Gateway"],
                "summary": "Readiness",
                "description": "Whether the gateway should be sent new work now: not while it "
                "shuts down, nor while its journal cannot commit (a full or unreachable Redis). "
                "Open without a token.",
                "responses": {
                    status: {
                        "description": description,
                        "content": {
                            "application/json": {"schema": {"$ref": REF.format(name="Readiness")}}
                        },
                    }
                    for status, description in (
                        ("200", "ready"),
                        ("503", "not ready; `reasons` says why"),
                    )
                },
            }
        },
        "/openapi.json": get(
            "openapi",
            "This description",
            "The OpenAPI 3.1 document of the native API. Open without a token.",
            {"description": "this document", "content": {"application/json": {}}},
        ),
        "/docs": get(
            "docs",
            "This description as a page",
            "A page that shows this document; it loads nothing from any other host.",
            {"description": "the page", "content": {"text/html": {}}},
        ),
    }


def _takes_query_token(path: str, method: str, op: Mapping[str, Any]) -> bool:
    """WebSocket upgrades (described as their 101) and event streams (gateway/query_token.py)."""
    return "101" in op.get("responses", {}) or event_stream(method, path)


# Whether the gateway serves (method, path) without the token: gateway/auth.py decides.
IsOpen = Callable[[str, str], bool]


def secure(paths: dict[str, Any], is_open: IsOpen) -> None:
    """Marks each operation with the token it takes (none if it is open) and its 401."""
    for path, item in paths.items():
        for method, op in item.items():
            if is_open(method.upper(), path):
                op["security"] = []
                continue
            if _takes_query_token(path, method, op):
                op["security"] = [{BEARER: []}, {QUERY_TOKEN: []}]
            op["responses"]["401"] = UNAUTHORIZED


def openapi_document(
    adapters: Mapping[str, Adapter], *, token: bool, is_open: IsOpen
) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    _, schemas = msgspec.json.schema_components([Health, Readiness], ref_template=REF)
    for name, adapter in adapters.items():
        if not describes_http(adapter):
            continue
        described = adapter.openapi()
        theirs = described.get("components", {}).get("schemas", {})
        clash = (set(described["paths"]) & set(paths)) | {
            k for k in set(theirs) & set(schemas) if theirs[k] != schemas[k]
        }
        if clash:
            # One plug-in's description must not garble another's.
            log.warning("adapter %s is left out of /openapi.json: %s clash", name, sorted(clash))
            continue
        paths.update(described["paths"])
        schemas.update(theirs)
    paths.update(gateway_paths())
    document: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "loopgate",
            "version": __version__,
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": TAGS,
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if token:
        document["components"]["securitySchemes"] = SECURITY_SCHEMES
        document["security"] = [{BEARER: []}]
        secure(paths, is_open)
    return document
