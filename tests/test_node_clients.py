"""Tests that need the Node clients skip locally with the fix when `npm ci` was not run, and
fail in CI with the same fix (tests/node_clients.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.node_clients import FIX, node_clients


@pytest.mark.parametrize("ci", ["true", "1"])
def test_ci_fails_when_the_modules_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception) as failed:
        node_clients(tmp_path)
    assert FIX in str(failed.value)
    assert "@ag-ui/client" in str(failed.value) and str(tmp_path) in str(failed.value)


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_a_local_run_skips_with_the_fix_when_the_modules_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception) as skipped:
        node_clients(tmp_path)
    assert FIX in str(skipped.value)


def test_no_node_modules_at_all_is_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        node_clients(tmp_path / "node_modules")
    assert f"{tmp_path / 'node_modules'} is missing" in str(failed.value)
    assert FIX in str(failed.value)


def test_ci_fails_without_node_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pytest.fail.Exception) as failed:
        node_clients()
    assert "node (>= 20) is not on the PATH" in str(failed.value) and FIX in str(failed.value)


def test_one_missing_package_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install older than package.json (a client added since) is not enough either."""
    monkeypatch.setenv("CI", "true")
    for name in ("@ag-ui/client", "@ag-ui/core", "ai"):
        (tmp_path / name).mkdir(parents=True)
    with pytest.raises(pytest.fail.Exception) as failed:
        node_clients(tmp_path)
    assert "@agentclientprotocol/sdk" in str(failed.value)
    assert "@ag-ui/client" not in str(failed.value)


def test_the_installed_clients_are_found() -> None:
    """tests/node as ``scripts/test`` leaves it: every client there, ``node`` to run them."""
    assert Path(node_clients()) == Path(shutil.which("node") or "")
