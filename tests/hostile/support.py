"""Hostile clients for real servers: the soak script's (benchmarks/hostile_loads.py) — a
`loopgate serve` child whose log goes to a file, a raw WebSocket client."""

from __future__ import annotations

from pathlib import Path

from benchmarks.hostile_loads import (
    Child,
    flood_until_cut_off,
    serve,
    still_served,
    ws_frame,
    ws_handshake,
)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


__all__ = ["Child", "flood_until_cut_off", "rss_mib", "serve", "ws_frame"]
__all__ += ["still_served", "ws_handshake"]
