"""One set of model flags and variables for every command, and the workspace default."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopgate.gateway.cli import build_parser
from loopgate.gateway.settings import Settings, load_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app

MODEL_FLAGS = ("--provider", "--openai-base-url", "--openai-model", "--scripted-delay")
# Every command that runs the reference loop in its own process.
LOOP_COMMANDS = ("run", "serve", "acp", "rpc")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_loop_command_has_the_same_model_flags() -> None:
    commands = _commands()
    seen: dict[str, set[tuple[str | None, str | None]]] = {flag: set() for flag in MODEL_FLAGS}
    for name in LOOP_COMMANDS:
        actions = {s: a for a in commands[name]._actions for s in a.option_strings}
        for flag in MODEL_FLAGS:
            assert flag in actions, f"loopgate {name} has no {flag}"
            seen[flag].add((actions[flag].dest, actions[flag].help))
    assert {flag: len(kinds) for flag, kinds in seen.items()} == dict.fromkeys(MODEL_FLAGS, 1)


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if "OPENAI" not in k and "LOOPGATE" not in k}
    return subprocess.run(
        [sys.executable, "-m", "loopgate", "run", *args],
        env={**clean, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_takes_the_model_from_flags(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    with serve_app(fake.app) as base:
        flags = ["--provider", "openai", "--openai-base-url", f"{base}/v1"]
        done = _run([*flags, "--openai-model", "text", "say hi"], {}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    assert fake.requests[0].body["model"] == "text"
    assert "authorization" not in fake.requests[0].headers


@pytest.mark.parametrize(
    ("keys", "sent"),
    [
        ({"OPENAI_API_KEY": "sk-plain"}, "sk-plain"),
        ({"OPENAI_API_KEY": "sk-plain", "LOOPGATE_OPENAI_API_KEY": "sk-ours"}, "sk-ours"),
    ],
)
def test_run_takes_the_model_and_key_from_the_environment(
    keys: dict[str, str], sent: str, tmp_path: Path
) -> None:
    fake = FakeOpenAI()
    with serve_app(fake.app) as base:
        env = {
            "LOOPGATE_PROVIDER": "openai",
            "LOOPGATE_OPENAI_BASE_URL": f"{base}/v1",
            "LOOPGATE_OPENAI_MODEL": "text",
            **keys,
        }
        done = _run(["say hi"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert fake.requests[0].headers["authorization"] == f"Bearer {sent}"


def test_run_without_a_model_name_says_what_is_missing(tmp_path: Path) -> None:
    done = _run(["--provider", "openai", "hi"], {}, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "loopgate run: the openai provider needs base_url and model"
    ]


def test_the_workspace_is_never_the_current_directory_by_default() -> None:
    home = {"HOME": "/home/ada"}
    assert load_settings(home).workspace == "/home/ada/.local/share/loopgate/workspace"
    xdg = {**home, "XDG_DATA_HOME": "/data"}
    assert load_settings(xdg).workspace == "/data/loopgate/workspace"
    given = {**xdg, "LOOPGATE_WORKSPACE": "/srv/ws"}
    assert load_settings(given).workspace == "/srv/ws"
    assert load_settings(given, {"workspace": "/tmp/w"}).workspace == "/tmp/w"
    assert Settings().workspace.endswith("/loopgate/workspace")


def test_run_writes_notes_under_the_default_workspace(tmp_path: Path) -> None:
    done = _run(
        ["write note hello", "--scripted-delay", "0", "--yes"],
        {"XDG_DATA_HOME": str(tmp_path / "data")},
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    notes = tmp_path / "data" / "loopgate" / "workspace" / "notes"
    assert len(list(notes.glob("*.md"))) == 1
    assert not (tmp_path / "notes").exists()
