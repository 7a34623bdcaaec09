"""Events the gateway adds to a run beyond the 15 loop kinds (kept and projected like any kind).

A tool that needs approval pauses the loop; the gateway publishes ``permission_request`` and
waits for any client to answer through :meth:`contracts.ports.RunService.respond`; the
outcome is published as ``permission_result``. Adapters turn the request into their
protocol's own question (ACP ``session/request_permission``, a JSON-RPC server→client
request) or pass it through as an event.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

PERMISSION_REQUEST = "permission_request"
PERMISSION_RESULT = "permission_result"

Decision = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]
DECISIONS: tuple[Decision, ...] = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
    "cancelled",
)


class PermissionToolCall(msgspec.Struct, kw_only=True, rename="camel"):
    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    kind: str = "other"


class PermissionRequest(msgspec.Struct, kw_only=True, rename="camel"):
    request_id: str
    tool_call: PermissionToolCall
    options: list[Decision] = msgspec.field(
        default_factory=lambda: ["allow_once", "allow_always", "reject_once", "reject_always"]
    )


class PermissionResult(msgspec.Struct, kw_only=True, rename="camel"):
    request_id: str
    decision: Decision
    # Who or what decided: "client", "remembered" (an earlier *_always), "timeout", "cancel".
    by: str = "client"
