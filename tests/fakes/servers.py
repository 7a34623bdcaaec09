"""Run an ASGI app on a real uvicorn server on 127.0.0.1 for the duration of a test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

__all__ = ["serve_app"]


@contextmanager
def serve_app(
    app: ASGIApp,
    *,
    startup_timeout_s: float = 10.0,
    shutdown_timeout_s: float = 5.0,
    log_level: str = "warning",
) -> Iterator[str]:
    """Serve ``app`` on an ephemeral loopback port; yield its base URL (``http://127.0.0.1:N``).

    The socket is bound here, before uvicorn starts, so there is no window in which another
    process could take the port. On exit the server shuts down gracefully; requests still in
    flight after ``shutdown_timeout_s`` are cancelled, and a thread that still will not stop
    is reported as an error rather than leaked silently.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level=log_level,
            # h11 everywhere: identical framing on every machine, whether or not httptools is
            # installed, so tests about broken streams see the same bytes.
            http="h11",
            ws="none",
            timeout_graceful_shutdown=max(shutdown_timeout_s - 1.0, 0.5),
        )
        server = uvicorn.Server(config)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # SystemExit on startup failure included
                errors.append(exc)

        thread = threading.Thread(target=run, name=f"uvicorn-test-{port}", daemon=True)
        thread.start()
        try:
            _wait_until_serving(server, thread, port, startup_timeout_s, errors)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(shutdown_timeout_s)
            if thread.is_alive():
                server.force_exit = True
                thread.join(shutdown_timeout_s)
            if thread.is_alive():
                raise RuntimeError(f"test server on port {port} did not shut down")
    finally:
        sock.close()


def _wait_until_serving(
    server: uvicorn.Server,
    thread: threading.Thread,
    port: int,
    timeout_s: float,
    errors: list[BaseException],
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not thread.is_alive():
            raise RuntimeError(f"test server on port {port} failed to start") from (
                errors[0] if errors else None
            )
        if server.started:
            # ``started`` is set once the listener exists; a real connect proves it accepts.
            with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
                return
        time.sleep(0.01)
    raise RuntimeError(f"test server on port {port} did not start within {timeout_s:g} s")
