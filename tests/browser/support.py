"""What the browser tests run beside the gateway: a page on another loopback port, headless
Chromium driven by tests/node/browser-cors.mjs, and the gateway's own record of requests."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.gateway.harness import REPO

NODE_DIR = REPO / "tests" / "node"
# Debian's build; ./scripts/test installs it when it is missing.
CHROMIUM = Path("/usr/bin/chromium")
PAGE = b"<!doctype html><meta charset=utf-8><title>a web UI</title><p>loopgate browser test"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test reports what matters


@contextmanager
def page_server() -> Iterator[int]:
    """A static page on 127.0.0.1 (a free port); yields the port. ``localhost`` reaches it too:
    Chromium tries the IPv4 loopback address when ``::1`` refuses."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class AccessLog(logging.Handler):
    """uvicorn's access log as (method, path, status): what the gateway was asked and answered,
    whatever the browser made of it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.requests: list[tuple[str, str, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            _client, method, path, _version, status = args
            self.requests.append((str(method), str(path), int(str(status))))


@contextmanager
def access_log() -> Iterator[AccessLog]:
    """Records the access log of every gateway in this process while it is open (the harness
    runs uvicorn at level warning, which silences it: lifted here, put back after)."""
    logger = logging.getLogger("uvicorn.access")
    handler = AccessLog()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_browser(config: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    """``node tests/node/browser-cors.mjs CONFIG``: what the pages saw (one JSON object)."""
    node = shutil.which("node")
    assert node, "node (>= 20) is required for the browser tests"
    assert CHROMIUM.exists(), "Chromium is required: ./scripts/test installs it (apt-get)"
    assert (NODE_DIR / "node_modules" / "playwright-core").is_dir(), (
        "run `npm ci` in tests/node (./scripts/test does)"
    )
    done = subprocess.run(
        [
            node,
            str(NODE_DIR / "browser-cors.mjs"),
            json.dumps({"chromium": str(CHROMIUM), **config}),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report
