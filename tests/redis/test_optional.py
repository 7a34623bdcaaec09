"""Redis is needed only when asked for: nothing imports the client otherwise."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.gateway.harness import REPO, free_port, stop, wait_healthy

# `python -X importtime` writes a line per module imported: "import time: … | <module>".
REDIS_IMPORT = re.compile(rb"\|\s+redis(\.|\s*$)", re.MULTILINE)


def test_importing_loopgate_does_not_import_redis() -> None:
    code = (
        "import sys, loopgate, loopgate.gateway.app, loopgate.gateway.cli, "
        "loopgate.gateway.journal, loopgate.gateway.hub\n"
        "found = sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.'))\n"
        "assert not found, found\n"
        "import loopgate.gateway.journal.redis_streams\n"  # and the check can fail
        "assert 'redis' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_serve_with_the_memory_journal_does_not_import_redis(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "imports.log"
    with log.open("wb") as stderr:  # a file: the log outgrows a pipe's buffer
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "loopgate", "serve", "--port", str(port)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, timeout=60)
        started = httpx.post(f"{base}/v1/runs", json={"replay": "one-tool-round"})
        assert started.status_code == 201
        with httpx.stream("GET", f"{base}/v1/runs/{started.json()['id']}/events") as stream:
            assert b"completion" in b"".join(stream.iter_bytes())
    finally:
        stop(proc)
    imports = log.read_bytes()
    # The log is what we think it is: the memory journal's import is in it.
    assert re.search(rb"\|\s+loopgate\.gateway\.journal\.memory\s*$", imports, re.MULTILINE)
    assert not REDIS_IMPORT.search(imports)


def test_serve_says_at_once_that_redis_does_not_answer() -> None:
    port = free_port()  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "loopgate", "serve", "--port", str(free_port()),
         "--journal", f"redis://127.0.0.1:{port}/0"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"--journal: cannot reach Redis at 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_redis_journal_without_the_client_installed_says_which_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['redis'] = None  # as if the extra were not installed\n"
        "from loopgate.gateway.journal import check_journal\n"
        "try:\n"
        "    check_journal('redis://127.0.0.1:6379/0')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert "pip install 'loopgate-server[redis]'" in done.stdout, done.stderr
