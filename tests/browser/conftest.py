"""The browser tests' artifacts: a directory per test for the driver's screenshots, named in the
report of a test that fails (tests/browser/support.py says where it is)."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from tests.browser.support import artifacts_dir


@pytest.fixture
def browser_artifacts(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    return artifacts_dir(tmp_path, request.node.name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    funcargs = getattr(item, "funcargs", {})
    artifacts = funcargs.get("browser_artifacts")
    if report.failed and isinstance(artifacts, Path):
        shots = sorted(str(p) for p in artifacts.glob("*.png")) or ["(no screenshot was taken)"]
        report.sections.append(("browser artifacts", "\n".join([str(artifacts), *shots])))
    return report
