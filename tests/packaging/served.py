"""A ``loopgate serve`` child process whose log is read as it is written, so a test waits for
the line saying the server listens instead of sleeping or polling."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

READY = re.compile(r"loopgate running on (http://\S+)")


class Served:
    def __init__(self, argv: Sequence[str], *, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.log: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 30) -> re.Match[str]:
        """The first log line matching ``pattern``; fails with the log if the process ends or
        the line does not come within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {pattern.pattern!r} in {timeout} s:\n{self.text()}"
                ) from None
            if line is None:
                raise AssertionError(f"the server ended (rc {self.proc.wait()}):\n{self.text()}")
            if match := pattern.search(line):
                return match

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 10) -> int:
        """Stopped as ``docker stop`` does (SIGTERM, then SIGKILL after its 10 s grace)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def text(self) -> str:
        return "".join(self.log)[-4000:]


@contextmanager
def served(argv: Sequence[str], *, env: dict[str, str], cwd: Path) -> Iterator[Served]:
    server = Served(argv, env=env, cwd=cwd)
    try:
        yield server
    finally:
        server.stop()
