"""The npm ``json-rpc-2.0`` client library (with ``ws``) drives POST /rpc and /rpc/ws.

tests/node/jsonrpc-client.mjs does the work and prints a summary. Needs ``npm ci`` in tests/node.
"""

from __future__ import annotations

import json
import subprocess

from tests.gateway.harness import running_gateway
from tests.node_clients import NODE_DIR, node_clients


def test_json_rpc_2_0_client_over_http_and_websocket() -> None:
    node = node_clients()
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
