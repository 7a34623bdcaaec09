"""``loopgate`` as a user runs it: a process of its own, in a directory, with no LOOPGATE_* or
OpenAI variables from the developer's shell and no terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def loopgate(
    cwd: Path, *args: str, program: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``loopgate ARGS`` (``program``, else ``python -m loopgate``) with stdin empty."""
    env = {k: v for k, v in os.environ.items() if "LOOPGATE" not in k and "OPENAI" not in k}
    command = [str(program)] if program else [sys.executable, "-m", "loopgate"]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,  # no controlling terminal: nobody is asked anything
    )
