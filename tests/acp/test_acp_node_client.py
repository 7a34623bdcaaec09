"""The TypeScript SDK (@agentclientprotocol/sdk 2.x) drives ``loopgate acp``: prompt, cancel.

Needs ``npm ci`` in tests/node (tests/node_clients.py: skipped locally without it, failed in CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.acp.support import REPO
from tests.node_clients import NODE_DIR, node_clients

DRIVER = NODE_DIR / "acp-drive.mjs"


def test_node_sdk_prompt_permission_and_cancel(tmp_path: Path) -> None:
    node = node_clients()
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
