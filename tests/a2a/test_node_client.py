"""@a2a-js/sdk's client (tests/node/a2a-client.mjs) against a real gateway: the card
discovered, a task streamed over JSON-RPC and over HTTP+JSON, then fetched."""

from __future__ import annotations

from typing import Any

import pytest

from tests.node_clients import node_clients, run_script

pytestmark = pytest.mark.gateway(scripted_delay_s=0.002)


@pytest.fixture(scope="module")
def results(gateway: str) -> dict[str, Any]:
    node_clients()
    return run_script("a2a-client.mjs", gateway)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_task_streams_to_its_end(results: dict[str, Any], binding: str) -> None:
    summary = results[binding]
    assert summary["errors"] == []
    assert summary["cases"][0] == "task" and "artifactUpdate" in summary["cases"]
    terminal = [s for s in summary["states"] if s != "TASK_STATE_WORKING"]
    assert terminal == ["TASK_STATE_COMPLETED"]
    assert summary["answer"].endswith("The result of 17 * 23 is 391.")
    assert "asks about" not in summary["answer"]  # the reasoning is an artifact of its own
    assert summary["fetched"] == "TASK_STATE_COMPLETED"
