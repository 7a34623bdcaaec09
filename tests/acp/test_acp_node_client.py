"""The TypeScript SDK (@agentclientprotocol/sdk 2.x) drives ``loopgate acp``: prompt, cancel.

Needs ``npm ci`` in tests/node; a missing install fails loudly rather than skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.acp.support import REPO

NODE_DIR = REPO / "tests" / "node"
DRIVER = NODE_DIR / "acp-drive.mjs"


def test_node_sdk_prompt_permission_and_cancel(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node, "node (>= 20) is required for the real-client tests"
    sdk = NODE_DIR / "node_modules" / "@agentclientprotocol" / "sdk"
    assert sdk.is_dir(), f"run `npm ci` in {NODE_DIR} first"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LOOPGATE_SCRIPTED_DELAY_S": "0.002",
        "LOOPGATE_WORKSPACE": str(tmp_path),
    }
    done = subprocess.run(
        [node, str(DRIVER), sys.executable, "-m", "loopgate", "acp"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
    )
    summary = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert done.returncode == 0 and summary["ok"], summary
    assert summary["stopReasons"] == ["end_turn", "end_turn", "cancelled"]
    assert summary["kinds"] == [
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
    ]
    assert len(list((tmp_path / "notes").glob("*.md"))) == 1
