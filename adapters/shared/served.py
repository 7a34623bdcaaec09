"""Which loop serves a run service, and on which model: read from the service's ``loop``
(contracts.loop.AgentLoop, which the gateway's hub exposes) — its ``name`` and, for the
reference loop, its provider's ``model``. Another implementation of the port may have neither.
"""

from __future__ import annotations

from typing import Any

from loopgate.contracts.ports import RunService


def served_loop(service: RunService) -> tuple[str | None, str | None]:
    """``(name, model)``, each a non-empty string or None."""
    loop: Any = getattr(service, "loop", None)
    name = getattr(loop, "name", None)
    model = getattr(getattr(loop, "provider", None), "model", None)
    return (
        name if isinstance(name, str) and name else None,
        model if isinstance(model, str) and model else None,
    )
