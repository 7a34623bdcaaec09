"""Events the gateway adds to a run beyond the 15 loop kinds (kept and projected like any kind).

A tool that needs approval pauses the loop; the gateway publishes ``permission_request`` and
waits for any client to answer through :meth:`contracts.ports.RunService.respond`; the
outcome is published as ``permission_result``. Adapters turn the request into their
protocol's own question (ACP ``session/request_permission``, a JSON-RPC server→client
request) or pass it through as an event. Their payloads are read through
:class:`contracts.events.PermissionRequestView` and ``PermissionResultView``. A run that goes
on as a new attempt on another instance says so with ``run_resumed``.
"""

from __future__ import annotations

from typing import Literal

PERMISSION_REQUEST = "permission_request"
PERMISSION_RESULT = "permission_result"
# A run taken over after its instance was lost, or handed over by one shutting down, goes on
# as a new attempt from its journal: ``{attempt, afterSeq}`` (afterSeq: the last seq of the
# attempts before). A round the last attempt left unfinished is done again after it.
# Projectors treat it as any kind they do not know (docs/scale.md, "Takeover after a crash").
RUN_RESUMED = "run_resumed"

Decision = Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancelled"]
DECISIONS: tuple[Decision, ...] = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
    "cancelled",
)
