"""Log lines a client can cause, bounded: one line per kind of event per interval, saying how
often it happened meanwhile.

A hostile client repeats what it does as fast as the server answers; a line per occurrence
(worse, a traceback) would let it fill the disk and drown what the operator needs to see.
"""

from __future__ import annotations

import logging
import time

REPORT_EVERY_S = 60.0


class RateLimitedLog:
    """The first occurrence of a kind is logged at once; later ones at most once per
    ``every_s``, with their count since the last line."""

    def __init__(
        self, logger: logging.Logger, level: int = logging.WARNING, every_s: float = REPORT_EVERY_S
    ) -> None:
        self.logger = logger
        self.level = level
        self.every_s = every_s
        self.last: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def __call__(self, kind: str, message: str, *args: object) -> None:
        self.count[kind] = self.count.get(kind, 0) + 1
        now = time.monotonic()
        if now - self.last.get(kind, -self.every_s) >= self.every_s:
            self.logger.log(
                self.level, message + " (%d since the last report)", *args, self.count[kind]
            )
            self.last[kind] = now
            self.count[kind] = 0
