"""The errors an ACP agent answers a request with: JSON-RPC errors, converted to the SDK's
``acp.RequestError`` at the edge (adapters.acp.server)."""

from __future__ import annotations

from typing import Any

from ..shared.rpc_errors import INVALID_REQUEST, RESOURCE_NOT_FOUND


class AgentError(Exception):
    """A JSON-RPC error for the client; converted to ``acp.RequestError`` at the edge."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def not_found(session_id: str) -> AgentError:
    return AgentError(
        RESOURCE_NOT_FOUND,
        f"Resource not found: no session {session_id!r}",
        {"sessionId": session_id},
    )


def busy(session_id: str, run_id: str | None = None) -> AgentError:
    """A prompt while the session's thread has a run going (``run_id``, where known)."""
    data = {"sessionId": session_id}
    if run_id is not None:
        data["runId"] = run_id
    return AgentError(
        INVALID_REQUEST,
        f"session {session_id!r} already has a prompt running; wait for its answer or "
        "send session/cancel",
        data,
    )
