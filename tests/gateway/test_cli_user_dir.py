"""The ``loopgate`` command works in the user's directory, whichever way it is started.

Every test runs in a temporary directory outside the repository and starts the command by
absolute path: ``scripts/loopgate`` (which installs into the repository's .venv first) and the
installed ``loopgate`` of the environment running the tests. Each relative path the user gives
must resolve against that directory.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.cli_support import loopgate as run_loopgate
from tests.gateway.harness import REPO

LAUNCHERS = {
    "scripts/loopgate": REPO / "scripts" / "loopgate",
    "installed": Path(sys.executable).parent / "loopgate",
}


@pytest.fixture(params=sorted(LAUNCHERS))
def loopgate(request: pytest.FixtureRequest) -> Path:
    return LAUNCHERS[request.param]


@pytest.fixture
def user_dir(tmp_path: Path) -> Iterator[Path]:
    here = tmp_path / "project"
    here.mkdir()
    assert REPO not in here.parents and here != REPO
    yield here


def command(loopgate: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Up to two minutes: scripts/loopgate may install first.
    return run_loopgate(cwd, *args, program=loopgate, timeout=120)


LOOP = """
async def loop(ctx):
    yield {"kind": "content_delta", "data": {"delta": "from my_loop: " + ctx.input}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}
"""


def test_a_loop_module_in_the_users_directory(loopgate: Path, user_dir: Path) -> None:
    (user_dir / "my_loop.py").write_text(LOOP)
    done = command(loopgate, user_dir, "run", "--loop", "my_loop:loop", "hello")
    assert done.returncode == 0, done.stderr
    assert "from my_loop: hello" in done.stdout


def test_tools_and_a_system_prompt_file_in_the_users_directory(
    loopgate: Path, user_dir: Path
) -> None:
    (user_dir / "my_tools.py").write_text(
        'def lookup(topic: str) -> str:\n    """Look a topic up."""\n    return "found " + topic\n'
    )
    (user_dir / "prompt.txt").write_text("You are terse.")
    # "client tool": the scripted model calls the first tool it is offered beyond the demo's.
    done = command(
        loopgate,
        user_dir,
        "run",
        "--tools",
        "my_tools",
        "--system-prompt-file",
        "prompt.txt",
        "--scripted-delay",
        "0",
        "client tool",
    )
    assert done.returncode == 0, done.stderr
    assert "← lookup ok" in done.stdout and "found " in done.stdout


def test_replay_of_a_recording_in_the_users_directory(loopgate: Path, user_dir: Path) -> None:
    shutil.copy(REPO / "conformance" / "streams" / "parallel-tools.jsonl", user_dir / "rec.jsonl")
    done = command(loopgate, user_dir, "replay", "rec.jsonl", "--adapter", "native")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("id: 1\ndata: ") and '"run_id":"parallel-tools"' in done.stdout


def test_a_sqlite_journal_and_a_workspace_in_the_users_directory(
    loopgate: Path, user_dir: Path
) -> None:
    (user_dir / "data").mkdir()
    done = command(loopgate, user_dir, "rpc", "--journal", "sqlite:data/runs.db")
    assert done.returncode == 0, done.stderr
    assert (user_dir / "data" / "runs.db").is_file()

    (user_dir / "ws").mkdir()
    args = ("run", "--workspace", "ws", "--yes", "--scripted-delay", "0", "write note hello")
    done = command(loopgate, user_dir, *args)
    assert done.returncode == 0, done.stderr
    assert [p.parent.name for p in (user_dir / "ws").rglob("*.md")] == ["notes"]
