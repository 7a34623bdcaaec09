"""A real Redis for the tests: ``LOOPGATE_TEST_REDIS_URL``, or a redis-server of our own.

Our own is started on a free port with nothing persisted (``--save '' --appendonly no``) and
stopped at the end; ./scripts/test installs Debian's redis-server when there is none.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.gateway.harness import free_port


@contextmanager
def redis_server() -> Iterator[str]:
    """``redis://HOST:PORT/DB`` of a running server."""
    given = os.environ.get("LOOPGATE_TEST_REDIS_URL")
    if given:
        yield given
        return
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                raise RuntimeError("redis-server exited early")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                if redis.Redis.from_url(url).ping():
                    break
            except (OSError, redis.RedisError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
