"""The audit log: one JSON line per security-relevant action, on the ``loopgate.audit`` logger.

Run started, cancelled, steered, answered; access refused; a credential used (once per
principal and transport per minute, not per request: a busy key would drown the rest). Each line
names the principal (subject, tenant, how it was proven) and the run, never a credential.
Operators route the logger where they keep such lines (docs/auth.md)."""

from __future__ import annotations

import logging
import logging.handlers
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import msgspec

from ...contracts.principal import Principal
from .presented import Rejected

log = logging.getLogger("loopgate.audit")
_encode = msgspec.json.Encoder().encode
# A credential's use is told at most this often per principal: enough to see who is active.
USED_EVERY_S = 60.0
MAX_REMEMBERED = 10_000


class _AuditHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler route_audit installs (and replaces): handlers others put on the logger stay."""


class _AuditFileHandler(logging.handlers.WatchedFileHandler):
    pass


def route_audit(destination: str) -> None:
    """Send the audit lines to ``destination`` ("stderr", "off" or a file), each a bare JSON
    line, whatever the server's log level: an operator who asked for audit lines gets them."""
    for old in list(log.handlers):
        if isinstance(old, _AuditHandler | _AuditFileHandler):
            log.removeHandler(old)
            old.close()
    # Bare JSON lines of their own, not also the root logger's "INFO:loopgate.audit:…" copy.
    log.propagate = False
    if destination == "off":
        log.setLevel(logging.CRITICAL + 1)
        return
    handler: logging.Handler
    if destination == "stderr":
        handler = _AuditHandler(sys.stderr)
    else:
        # Reopened when logrotate moves the file away.
        handler = _AuditFileHandler(destination, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def who(principal: Principal) -> dict[str, Any]:
    return {"subject": principal.subject, "tenant": principal.tenant, "via": principal.via}


def audit(action: str, principal: Principal | None, **fields: Any) -> None:
    """Write one line: ``{"audit": action, "principal": {...}, **fields}``."""
    if not log.isEnabledFor(logging.INFO):
        return
    line: dict[str, Any] = {"audit": action, "ts": time.time()}
    if principal is not None:
        line["principal"] = who(principal)
    line.update({k: v for k, v in fields.items() if v is not None})
    log.info("%s", _encode(line).decode())


class AccessAudit:
    """The middleware's observer: refusals always, a credential's use now and then."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self._seen: dict[tuple[str, str, str], float] = {}

    def __call__(
        self,
        scope: MutableMapping[str, Any],
        principal: Principal | None,
        rejected: Rejected | None,
    ) -> None:
        client = scope.get("client")
        where = {"path": scope.get("path", "")[:200], "client": client[0] if client else None}
        if principal is None:
            reason = rejected.reason if rejected is not None else "no_or_unknown_credentials"
            audit("access_refused", None, reason=reason, **where)
            return
        key = (principal.via, principal.tenant, principal.subject)
        now = self.clock()
        if now - self._seen.get(key, float("-inf")) < USED_EVERY_S:
            return
        if len(self._seen) >= MAX_REMEMBERED:
            self._seen.clear()
        self._seen[key] = now
        audit("credential_used", principal, transport=scope["type"], **where)
