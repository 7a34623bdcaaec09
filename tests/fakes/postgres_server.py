"""Real PostgreSQL servers for the tests: ``LOOPGATE_TEST_POSTGRES_URL``, or postgres
processes of our own (Debian's binaries under /usr/lib/postgresql/*/bin; ./scripts/test
installs them when there are none).

Ours: a fresh cluster (initdb, trust auth) in a temporary directory, on a free port of
127.0.0.1, that a test can stall whole (SIGSTOP to the postmaster and its backends) or kill.
PostgreSQL refuses to run as root: as root it runs as the ``postgres`` user the Debian package
creates.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from tests.gateway.harness import free_port

START_TIMEOUT_S = 30.0


def _binary(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    which = shutil.which(name)
    if which is None:
        raise RuntimeError(f"no {name}: install postgresql (./scripts/test does)")
    return which


class PostgresProcess:
    """One postgres of our own; started, stopped (SIGSTOP: stalled), killed, started again
    on the same port and data directory."""

    def __init__(self) -> None:
        self.port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="loopgate-pg-")
        self.data = Path(self._tmp.name) / "data"
        self.proc: subprocess.Popen[bytes] | None = None
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            self._as = {"user": "postgres", "group": "postgres"}
            shutil.chown(self._tmp.name, "postgres", "postgres")
        subprocess.run(
            [_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "-E", "UTF8", "--no-sync"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **self._as,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> PostgresProcess:
        self.proc = subprocess.Popen(
            [_binary("postgres"), "-D", str(self.data), "-p", str(self.port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self._tmp.name}",
             "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            **self._as,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited early")
            try:
                with psycopg.connect(self.url, connect_timeout=1):
                    return self
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def _signal(self, sig: signal.Signals) -> None:
        """To the postmaster and every backend (each backend is a session of its own: a
        process group's signal would miss them)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        pid = self.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for each in [pid, *map(int, children)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, sig)

    def stall(self) -> None:
        """Every process of the server stopped: connections stay open, nothing answers."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self._signal(signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> PostgresProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
        self._tmp.cleanup()


@contextmanager
def postgres_server() -> Iterator[str]:
    """``postgresql://…`` of a running server."""
    given = os.environ.get("LOOPGATE_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    with PostgresProcess() as server:
        yield server.url
