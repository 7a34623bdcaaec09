"""One ACP connection: the SDK's JSON-RPC connection and router around an :class:`AcpAgent`.

The official ``agent-client-protocol`` package does the protocol bookkeeping: its
``Connection`` correlates ids and runs each incoming request as its own task (so a
``session/cancel`` is handled while a prompt runs); its agent router validates params against
the ACP schema models and calls the agent's methods. This module adds the error policy: a
schema violation becomes -32602 naming the field, an unknown method -32601 naming it, and an
unexpected exception a generic -32603 (its text stays in the log) — and a bound on the requests
in progress (:class:`BoundedConnection`).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio
from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.exceptions import RequestError
from pydantic import ValidationError

from ...contracts.client_errors import client_message
from ...contracts.ports import Forbidden, RunNotFound, ServiceUnavailable
from ..shared.rpc_errors import (
    FORBIDDEN,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
)
from .agent import AcpAgent
from .errors import AgentError
from .rpc import PeerGone, error_response

log = logging.getLogger("loopgate.acp")
MAX_REPORTED_ERRORS = 10
# Requests and notifications of one connection handled at once (an IDE has a few at most).
MAX_IN_FLIGHT = 32


def _field(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "params"


def invalid_params(exc: ValidationError) -> RequestError:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    reported = [{"field": _field(e["loc"]), "message": e["msg"]} for e in errors]
    first = reported[0] if reported else {"field": "params", "message": "invalid"}
    return RequestError(
        INVALID_PARAMS,
        f"Invalid params: {first['field']}: {first['message']}",
        {"errors": reported[:MAX_REPORTED_ERRORS]},
    )


def make_handler(agent: AcpAgent) -> Any:
    router = build_agent_router(agent, use_unstable_protocol=True)  # type: ignore[arg-type]

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        try:
            return await router(method, params, is_notification)
        except AgentError as exc:
            if is_notification:
                return None
            raise RequestError(exc.code, exc.message, exc.data) from None
        except RequestError as exc:
            if is_notification:
                return None  # unknown notifications are ignored (spec)
            if exc.code == METHOD_NOT_FOUND:
                raise RequestError(
                    METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method}
                ) from None
            raise
        except ValidationError as exc:
            if is_notification:
                log.info("ignored %s notification with invalid params", method)
                return None
            raise invalid_params(exc) from None
        except RunNotFound as exc:
            # A session's run that went away while it was read (RunGone: dropped from memory).
            if is_notification:
                return None
            raise RequestError(
                RESOURCE_NOT_FOUND,
                f"Resource not found: {client_message(exc)}",
                {"runId": exc.run_id},
            ) from None
        except Forbidden as exc:
            # A read-only key starting a session or a prompt, or cancelling a run. ACP has no
            # code for it; -32000 (authentication required) would have a client try to log
            # in, so it is loopgate's -32010, as on its JSON-RPC API.
            if is_notification:
                return None
            raise RequestError(FORBIDDEN, f"Forbidden: {exc.detail}") from None
        except ServiceUnavailable as exc:
            # The runs live in another gateway (`loopgate acp --server`) that does not answer.
            if is_notification:
                return None
            raise RequestError(INTERNAL_ERROR, f"Internal error: {exc.detail}") from None
        except PeerGone:
            # The client left mid-request (its session updates could not be sent): no answer
            # reaches it, and nothing unexpected happened.
            if is_notification:
                return None
            raise RequestError(INTERNAL_ERROR, "Internal error: the client went away") from None
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            log.exception("unexpected error handling %s", method)
            raise RequestError(
                INTERNAL_ERROR, "Internal error: the agent's log has the details"
            ) from None

    return handle


class BoundedConnection(Connection):
    """The SDK's connection with a bound on the client's requests in progress.

    The SDK reads every message at once and starts a task for each: a client that floods
    requests and reads no answers grows tasks and unsent answers without end, and each of
    them logs a traceback once the client is gone. Here at most ``max_in_flight`` requests
    and notifications run at once; beyond, a request is answered -32603 (``data.retryAfter``,
    as for a busy gateway; ACP reserves -32000 for "authentication required") by the reader itself
    and a notification (``session/cancel``) runs in the reader — so the reader reads no
    further while that answer cannot be written. Replies to the agent's own requests (a
    permission answer) are always read, whatever is in progress.

    It overrides the SDK's private receive loop and request runners: agent-client-protocol
    is pinned (pyproject.toml), and tests/hostile/test_floods.py fails if they change.
    """

    def __init__(self, handler: Any, transport: Any, max_in_flight: int) -> None:
        super().__init__(handler, transport, listening=False)
        self.max_in_flight = max_in_flight
        self.in_flight = 0

    async def _receive_loop(self) -> None:
        transport = self._transport
        while (message := await transport.receive()) is not None:
            if "method" not in message:
                self._handle_response(message)
            elif self.in_flight < self.max_in_flight:
                self.in_flight += 1
                self._process_message(message)  # a task: _run_request or _run_notification
            elif "id" in message:
                busy = error_response(
                    message["id"],
                    INTERNAL_ERROR,
                    f"server busy: {self.in_flight} requests of this connection are in "
                    "progress; wait for their answers",
                    {"retryAfter": 1},
                )
                # Written by the reader: it reads nothing more until this answer is out.
                with contextlib.suppress(ConnectionError):
                    await transport.send(busy)
            else:
                await Connection._run_notification(self, message)
        self._disconnect()

    async def _run_request(self, message: dict[str, Any]) -> None:
        try:
            await super()._run_request(message)
        except OSError:
            # Only the answer's send can fail here (the SDK turns every handler error into an
            # error answer): it has nobody to go to, and the transport said why, once.
            pass
        finally:
            self.in_flight -= 1

    async def _run_notification(self, message: dict[str, Any]) -> None:
        try:
            await super()._run_notification(message)
        finally:
            self.in_flight -= 1


async def serve_connection(
    agent: AcpAgent, transport: Any, *, max_in_flight: int = MAX_IN_FLIGHT
) -> None:
    """Serve one client until it disconnects; the runs it was waiting for are cancelled."""
    conn = BoundedConnection(make_handler(agent), transport, max_in_flight)
    try:
        async with anyio.create_task_group() as background:
            agent.attach(conn, background)
            try:
                await conn.main_loop()
            finally:
                await agent.shutdown()
                background.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await conn.close()
