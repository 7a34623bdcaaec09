"""Real servers for gateway tests: the gateway on uvicorn (thread or process) on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import uvicorn

from loopgate.gateway.server import GatewayServer, make_server
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_gateway(
    *, telemetry: Telemetry | None = None, **overrides: Any
) -> Iterator[tuple[str, GatewayServer]]:
    """The real gateway (lifespan, WebSockets, drain on shutdown) in a background thread, as
    ``loopgate serve`` makes it; ``overrides`` are its settings."""
    defaults: dict[str, Any] = {"scripted_delay_s": 0.0, "port": free_port()}
    settings = Settings(**{**defaults, **overrides})
    server = make_server(settings, log_level="warning", telemetry=telemetry)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{settings.port}"
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("gateway did not start")
        time.sleep(0.01)
    try:
        yield base, server
    finally:
        server.should_exit = True
        thread.join(15)
        if thread.is_alive():
            server.force_exit = True
            thread.join(5)


@contextmanager
def gateway_process(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``loopgate serve`` as a child process; stopped with SIGINT (a graceful shutdown)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopgate", "serve", "--port", str(port), *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        yield base, proc
    finally:
        stop(proc)


def wait_healthy(
    base: str, proc: subprocess.Popen[bytes], timeout: float = 20, log: IO[bytes] | None = None
) -> None:
    """Wait for ``/healthz``; a process that exits first is an error quoting its stderr (the
    pipe, or ``log``: the file it was sent to)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if log is not None:
                log.seek(0)
                err = log.read().decode()
            else:
                err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"loopgate serve exited early: {err[-2000:]}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError("loopgate serve did not become healthy")


def stop(proc: subprocess.Popen[bytes], timeout: float = 15) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


__all__ = ["GatewayServer", "gateway_process", "running_gateway", "stop", "uvicorn"]
