"""The audit log's lines as a gateway running in this process writes them: a handler on the
``loopgate.audit`` logger itself (it does not propagate to the root logger, so caplog sees none)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class AuditLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(record.getMessage()))

    def reasons(self) -> list[str]:
        return [x["reason"] for x in self.lines if x["audit"] == "access_refused"]


@contextmanager
def captured_audit() -> Iterator[AuditLines]:
    logger = logging.getLogger("loopgate.audit")
    handler, level = AuditLines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
