"""One ACP connection: the SDK's JSON-RPC connection and router around an :class:`AcpAgent`.

The official ``agent-client-protocol`` package does the protocol bookkeeping: its
``Connection`` correlates ids and runs each incoming request as its own task (so a
``session/cancel`` is handled while a prompt runs); its agent router validates params against
the ACP schema models and calls the agent's methods. This module adds the error policy: a
schema violation becomes -32602 naming the field, an unknown method -32601 naming it, and an
unexpected exception a generic -32603 (its text stays in the log).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.exceptions import RequestError
from pydantic import ValidationError

from adapters.acp.agent import AcpAgent, AgentError

log = logging.getLogger("loopgate.acp")
MAX_REPORTED_ERRORS = 10


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
        -32602,
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
            if exc.code == -32601:
                raise RequestError(
                    -32601, f"Method not found: {method}", {"method": method}
                ) from None
            raise
        except ValidationError as exc:
            if is_notification:
                log.info("ignored %s notification with invalid params", method)
                return None
            raise invalid_params(exc) from None
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            log.exception("unexpected error handling %s", method)
            raise RequestError(-32603, "Internal error: the agent's log has the details") from None

    return handle


async def serve_connection(agent: AcpAgent, transport: Any) -> None:
    """Serve one client until it disconnects; the runs it was waiting for are cancelled."""
    conn = Connection(make_handler(agent), transport, listening=False)
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
