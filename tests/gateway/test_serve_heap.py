"""``loopgate serve`` freezes the heap it was built with before it serves (gc.freeze)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import pytest

from loopgate.gateway.commands import serve


def test_the_server_is_built_then_its_heap_frozen_then_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    class Server:
        stopped_by = None
        config = argparse.Namespace(backlog=16)

        def run(self, sockets: list[object]) -> None:
            calls.append("run")

    def make_server(settings: Any, log_level: str) -> Server:
        calls.append("build")
        return Server()

    def bind(host: str, port: int, backlog: int) -> list[object]:
        calls.append("bind")
        return []

    import loopgate.gateway.server as server_module

    monkeypatch.setattr(server_module, "make_server", make_server)
    monkeypatch.setattr(server_module, "bind", bind)
    monkeypatch.setattr(serve, "freeze_startup_heap", lambda: calls.append("freeze"))
    args = argparse.Namespace(log_level="warning", **dict.fromkeys(serve.SETTING_FLAGS))
    assert serve.main(args) == 0
    assert calls == ["build", "bind", "freeze", "run"]


def test_freezing_leaves_nothing_for_a_full_collection_to_scan_but_what_came_after() -> None:
    # In a process of its own: a frozen heap stays frozen.
    code = (
        "import gc, loopgate.gateway.app\n"
        "from loopgate.gateway.commands.serve import freeze_startup_heap\n"
        "before = len(gc.get_objects())\n"
        "freeze_startup_heap()\n"
        "print(before, gc.get_freeze_count(), len(gc.get_objects()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, frozen, after = map(int, out.stdout.split())
    # The app's modules are some 40,000 objects (the MCP and ACP SDKs, imported by their first
    # request, are not among them); nearly all frozen, next to nothing left to scan.
    assert frozen > 30_000 and frozen > before * 0.9 and after < 1_000
