"""The real Node clients in tests/node (@ag-ui/client, `ai`, openai, the ACP and MCP SDKs,
playwright-core, …): whether they are installed, and running one of their scripts.

Without them a local run skips those tests, saying how to install them; a CI run (``CI`` set,
as CI services do) fails them with the same words: CI must never pass by skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.gateway.harness import REPO

NODE_DIR = REPO / "tests" / "node"
FIX = "run `cd tests/node && npm ci`, or ./scripts/test which installs them"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def unavailable(message: str) -> NoReturn:
    """Skip here, fail in CI."""
    if in_ci():
        pytest.fail(f"{message} (CI never skips the Node client tests)", pytrace=False)
    pytest.skip(message)


def missing_packages(modules: Path) -> list[str]:
    """The packages tests/node/package.json pins that ``modules`` lacks."""
    manifest = json.loads((NODE_DIR / "package.json").read_text())
    return [name for name in manifest["dependencies"] if not (modules / name).is_dir()]


def node_clients(modules: Path = NODE_DIR / "node_modules") -> str:
    """The ``node`` that runs the clients, once they are all installed in ``modules``."""
    node = shutil.which("node")
    if node is None:
        unavailable(f"node (>= 20) is not on the PATH: install Node.js, then {FIX}")
    where = modules.relative_to(REPO) if modules.is_relative_to(REPO) else modules
    if not modules.is_dir():
        unavailable(f"the Node test clients are not installed ({where} is missing): {FIX}")
    missing = missing_packages(modules)
    if missing:
        lacks = ", ".join(missing)
        unavailable(f"the Node test clients are not installed ({where} lacks {lacks}): {FIX}")
    return node


def run_script(script: str, *args: str, timeout: float = 180) -> dict[str, Any]:
    """``node tests/node/SCRIPT ARGS…``; its stdout is one JSON object: {scenario: summary}."""
    done = subprocess.run(
        [node_clients(), str(NODE_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]
