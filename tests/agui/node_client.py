"""What the Node AG-UI scripts in tests/node (the real @ag-ui/client) report of a run."""

from __future__ import annotations

from typing import Any


def clean(summary: dict[str, Any]) -> dict[str, Any]:
    """A run the client took without complaint, that began with RUN_STARTED."""
    assert "crashed" not in summary, summary.get("crashed")
    assert summary["failed"] is None, summary["failed"]
    assert summary["problems"] == [], summary["problems"]
    assert summary["types"][0] == "RUN_STARTED"
    return summary
