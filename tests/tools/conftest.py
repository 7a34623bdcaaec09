"""Fixtures for the tool-source tests: real MCP servers, started once where they can be shared."""

from __future__ import annotations

import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loopgate.gateway.reference.types import LoopContext
from loopgate.gateway.tools.mcp_specs import McpServerSpec
from tests.node_clients import NODE_DIR, node_clients

ROOT = Path(__file__).resolve().parents[2]
FAKE_SERVER = ROOT / "tests" / "fakes" / "mcp_server.py"
EVERYTHING = NODE_DIR / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
CTX = LoopContext(round=1, elapsed_ms=0.0, history=[])


@pytest.fixture(scope="session")
def fake_stdio() -> McpServerSpec:
    return McpServerSpec(name="fake", command=sys.executable, args=[str(FAKE_SERVER)])


@pytest.fixture(scope="session")
def fake_http_url() -> Iterator[str]:
    """The fake server over streamable HTTP, in its own process, for the whole session."""
    with fake_http_server() as (url, _):
        yield url


@contextmanager
def fake_http_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A fake server process over streamable HTTP: its endpoint URL and the process."""
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--http"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = _first_line(proc, timeout_s=30.0)
        match = re.fullmatch(r"PORT (\d+)\n", line)
        assert match, f"the fake MCP server printed {line!r} instead of its port"
        yield f"http://127.0.0.1:{match.group(1)}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.fixture(scope="session")
def everything() -> McpServerSpec:
    """The reference npm server, over stdio (its default transport)."""
    return McpServerSpec(name="everything", command=node_clients(), args=[str(EVERYTHING)])


def _first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "the fake MCP server did not print its port in time"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            return proc.stdout.readline()
        assert proc.poll() is None, f"the fake MCP server exited with {proc.returncode}"
