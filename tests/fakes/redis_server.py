"""Real Redis servers for the tests: ``LOOPGATE_TEST_REDIS_URL``, or redis-servers of our own.

Ours listen on free ports of 127.0.0.1 and persist nothing unless asked; ./scripts/test
installs Debian's redis-server when there is none.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from tests.gateway.harness import free_port

START_TIMEOUT_S = 10.0


class RedisProcess:
    """One redis-server (or sentinel: ``--sentinel``) on a port of its own; started, killed
    and started again on the same port (and ``cwd``, where it keeps what it persists)."""

    def __init__(self, *args: str, cwd: Path | None = None, plain: bool = True) -> None:
        """``args`` after the port; ``plain``: it answers PING in plain text (not TLS-only)."""
        self.port = free_port()
        self.args = args
        self.cwd = cwd
        self.plain = plain
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        listen = ["--port", "0", "--tls-port", str(self.port)] if not self.plain else []
        self.proc = subprocess.Popen(
            [binary, *self.args, *(listen or ["--port", str(self.port)]), "--bind", "127.0.0.1"],
            cwd=self.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server {' '.join(self.args)} exited early")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                if not self.plain or redis.Redis(port=self.port, socket_timeout=1).ping():
                    return self
            except (OSError, redis.RedisError):
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.02)

    def __enter__(self) -> RedisProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    def kill(self) -> None:
        """As a crash: SIGKILL, nothing flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@contextmanager
def redis_server() -> Iterator[str]:
    """``redis://HOST:PORT/DB`` of a running server, nothing persisted."""
    given = os.environ.get("LOOPGATE_TEST_REDIS_URL")
    if given:
        yield given
        return
    with RedisProcess("--save", "", "--appendonly", "no") as server:
        yield server.url
