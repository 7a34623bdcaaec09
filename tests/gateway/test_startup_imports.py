"""What a gateway imports to start: not the MCP and ACP SDKs, which cost about half a second
each and are loaded by the first request to /mcp or /acp (adapters/shared/lazy.py). Both
endpoints' own tests (tests/mcp, tests/acp) show the first request still gets served."""

from __future__ import annotations

import subprocess
import sys

from tests.gateway.harness import REPO

PROBE = """
import sys
from loopgate.gateway.app import create_app
from loopgate.gateway.settings import Settings
create_app(Settings())
print(sorted(m for m in ("mcp", "acp", "pydantic_ai") if m in sys.modules))
"""


def test_an_app_is_built_without_the_protocol_sdks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
