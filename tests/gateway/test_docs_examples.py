"""The Python example in docs/api.md runs as written."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.gateway.harness import REPO


def test_python_api_example_runs() -> None:
    text = (REPO / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/api.md has no Python example"
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            "1 content_delta {'delta': 'Hello'}",
            "2 completion {'status': 'completed'}",
        ]
