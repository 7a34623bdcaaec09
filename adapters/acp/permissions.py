"""A run's permission requests asked of the ACP client (``session/request_permission``) and
its answers passed to the hub as decisions."""

from __future__ import annotations

import logging
from typing import Any

import anyio

from ...contracts.ports import RunFinished, RunNotFound, RunService
from .options import Peer
from .projector import REQUEST_PERMISSION, PermissionAsk
from .sessions import ActivePrompt

log = logging.getLogger("loopgate.acp")

DECISIONS = ("allow_once", "allow_always", "reject_once", "reject_always")


async def ask(
    service: RunService, peer: Peer, active: ActivePrompt, run_id: str, asked: PermissionAsk
) -> None:
    """Ask the client, then answer the run: ``cancelled`` when the prompt was cancelled
    meanwhile, or the client gave no answer."""
    active.asks.add(asked.request_id)
    offered = {o["optionId"] for o in asked.params["options"]}
    decision = "cancelled"
    try:
        response = await peer.send_request(REQUEST_PERMISSION, asked.params)
        decision = decision_from(response, offered)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        # The client failed to answer (an error, or the connection closed): not approved.
        log.info("permission request %s got no answer: %s", asked.request_id, type(exc).__name__)
    finally:
        active.asks.discard(asked.request_id)
    if active.cancelled:
        decision = "cancelled"
    await respond(service, run_id, asked.request_id, decision)


async def respond(service: RunService, run_id: str, request_id: str, decision: str) -> None:
    try:
        await service.respond(run_id, request_id, decision)
    except (RunNotFound, RunFinished):
        pass
    except Exception:
        log.warning("could not answer permission request %s of run %s", request_id, run_id)


def decision_from(response: Any, offered: set[str]) -> str:
    """Map a ``session/request_permission`` answer to a hub decision."""
    outcome = response.get("outcome") if isinstance(response, dict) else None
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return "cancelled"
    option = outcome.get("optionId")
    if isinstance(option, str) and option in offered and option in DECISIONS:
        return option
    return "reject_once"  # an option we never offered is no approval
