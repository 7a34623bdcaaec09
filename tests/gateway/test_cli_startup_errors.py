"""A command that cannot start says why in one line and exits 2: a --loop or --tools module
that does not import, an unknown flag, a port in use. Never a traceback."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest

from tests.gateway.cli_support import loopgate
from tests.gateway.harness import free_port

# Every command that runs a loop in its own process (replay takes no --loop).
COMMANDS = ("serve", "run", "acp", "rpc", "mcp")


def command_args(command: str, *flags: str) -> list[str]:
    """``command`` with ``flags``, and what it needs besides to get as far as its loop."""
    if command == "run":
        return [command, *flags, "hello"]
    if command == "serve":
        return [command, *flags, "--port", str(free_port())]
    return [command, *flags]


MODULES = {
    "syntax.py": "async def loop(ctx):\n    yield {\n\ndef broken(:\n",
    "needs_missing.py": "import json\nimport not_installed_anywhere\n",
    "raises.py": "TOKEN = 'hunter2'\n\n\ndef setup():\n    raise KeyError(TOKEN)\n\n\nsetup()\n",
    "fine.py": "async def loop(ctx):\n    yield {'kind': 'completion', 'data': {}}\n",
}
# (the flags, the line the command prints after "loopgate COMMAND: ")
CASES = {
    "loop_syntax": (
        ["--loop", "syntax:loop"],
        r"--loop syntax:loop: syntax\.py:[24]: SyntaxError: .+",
    ),
    "loop_import_fails": (
        ["--loop", "needs_missing:loop"],
        r"--loop needs_missing:loop: needs_missing\.py:2: ModuleNotFoundError: "
        r"No module named 'not_installed_anywhere'",
    ),
    "loop_raises": (
        ["--loop", "raises:loop"],
        r"--loop raises:loop: raises\.py:5: KeyError while importing",
    ),
    "loop_not_found": (
        ["--loop", "nowhere:loop"],
        r"--loop nowhere:loop: no module named 'nowhere' in .+ or the installed packages .+",
    ),
    "loop_no_attribute": (
        ["--loop", "fine:agent"],
        r"--loop fine:agent: fine\.py has no attribute 'agent'",
    ),
    "loop_file_name": (
        ["--loop", "fine.py:loop"],
        r"--loop fine\.py:loop: give a module name \(fine\), not a file name",
    ),
    "tools_syntax": (
        ["--tools", "syntax"],
        r"--tools syntax: syntax\.py:[24]: SyntaxError: .+",
    ),
    # Not modules, but found as the loop is built and started, where the modules are.
    "prompt_file_missing": (
        ["--system-prompt-file", "missing.txt"],
        r"cannot read --system-prompt-file missing\.txt: No such file or directory",
    ),
    "loop_cmd_missing": (
        ["--loop-cmd", "/nonexistent/loop-program"],
        r"--loop-cmd: no program '/nonexistent/loop-program' \(not found or not executable\)",
    ),
}


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("user_modules")
    for name, source in MODULES.items():
        (here / name).write_text(source)
    return here


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", COMMANDS)
def test_a_loop_that_cannot_be_built_is_one_line(modules: Path, command: str, case: str) -> None:
    flags, line = CASES[case]
    done = loopgate(modules, *command_args(command, *flags))
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(f"loopgate {command}: {line}\n", done.stderr), done.stderr
    assert "hunter2" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", [*COMMANDS, "replay"])
def test_an_unknown_flag_shows_the_commands_usage(tmp_path: Path, command: str) -> None:
    # With what each needs besides: argparse reports a missing argument first.
    needed = {"run": ["hello"], "replay": ["--list"]}.get(command, [])
    done = loopgate(tmp_path, command, "--no-such-flag", *needed)
    assert done.returncode == 2
    assert done.stderr.startswith(f"usage: loopgate {command} ")
    lines = done.stderr.splitlines()
    assert lines[-1] == f"loopgate {command}: error: unrecognized arguments: --no-such-flag"


def test_a_port_in_use_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        started = time.monotonic()
        done = loopgate(tmp_path, "serve", "--port", str(port))
        took = time.monotonic() - started
    assert done.returncode == 2
    assert done.stderr == (
        f"loopgate serve: port {port} on 127.0.0.1 is already in use (another loopgate, or "
        "another server): stop it, or choose another port with --port\n"
    )
    assert "startup complete" not in done.stdout + done.stderr
    assert took < 30


def test_a_host_that_is_not_this_machines_is_one_line(tmp_path: Path) -> None:
    # TEST-NET-1 (RFC 5737): never an address of this machine; a token, as beyond loopback.
    done = loopgate(tmp_path, "serve", "--host", "192.0.2.1", "--token", "t0ken-long-enough-1")
    assert done.returncode == 2
    assert done.stderr == (
        "loopgate serve: cannot listen on --host 192.0.2.1: not an address of this machine\n"
    )
