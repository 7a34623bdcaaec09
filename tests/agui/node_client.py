"""Running the Node AG-UI scripts in tests/node (the real @ag-ui/client) from a test."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

from tests.gateway.harness import REPO

NODE_DIR = REPO / "tests" / "node"


def run_script(script: str, *args: str, timeout: float = 180) -> dict[str, Any]:
    """``node tests/node/SCRIPT ARGS…``; its stdout is one JSON object: {scenario: summary}."""
    node = shutil.which("node")
    assert node, "node (>= 20) is required for the real-client tests"
    assert (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir(), (
        "run `npm ci` in tests/node (./scripts/test does)"
    )
    done = subprocess.run(
        [node, str(NODE_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def clean(summary: dict[str, Any]) -> dict[str, Any]:
    """A run the client took without complaint, that began with RUN_STARTED."""
    assert "crashed" not in summary, summary.get("crashed")
    assert summary["failed"] is None, summary["failed"]
    assert summary["problems"] == [], summary["problems"]
    assert summary["types"][0] == "RUN_STARTED"
    return summary
