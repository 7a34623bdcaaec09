"""Hostile clients for real servers: the soak script's (benchmarks/hostile_loads.py) — a
`loopgate serve` child whose log goes to a file, a raw WebSocket client — and a way to wait
for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchmarks.hostile_loads import (
    Child,
    flood_until_cut_off,
    serve,
    still_served,
    ws_frame,
    ws_handshake,
)

T = TypeVar("T")


def wait_until(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``predicate`` until it returns something truthy (a condition, not a pause)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


__all__ = ["Child", "flood_until_cut_off", "rss_mib", "serve", "wait_until", "ws_frame"]
__all__ += ["still_served", "ws_handshake"]
