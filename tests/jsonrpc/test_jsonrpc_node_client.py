"""The npm ``json-rpc-2.0`` client library (with ``ws``) drives POST /rpc and /rpc/ws.

tests/node/jsonrpc-client.mjs does the work and prints a summary. Needs ``npm ci`` in tests/node.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from tests.gateway.harness import REPO, running_gateway

NODE_DIR = REPO / "tests" / "node"


def test_json_rpc_2_0_client_over_http_and_websocket() -> None:
    node = shutil.which("node")
    assert node, "node (>= 20) is required for the real-client tests"
    for package in ("json-rpc-2.0", "ws"):
        assert (NODE_DIR / "node_modules" / package).is_dir(), (
            f"{package} is not installed: run `npm ci` in {NODE_DIR}"
        )
    with running_gateway(scripted_delay_s=0.0) as (base, _server):
        proc = subprocess.run(
            [node, "jsonrpc-client.mjs", base],
            cwd=NODE_DIR,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert proc.stdout, f"no summary (rc={proc.returncode}): {proc.stderr.decode()[-2000:]}"
    summary = json.loads(proc.stdout)
    assert summary["ok"], summary["errors"]
    assert proc.returncode == 0
    assert len(summary["checks"]) >= 14
