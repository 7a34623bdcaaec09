"""What the browser tests run beside the gateway: a page on another loopback port, headless
Chromium driven by tests/node/browser-cors.mjs, and the gateway's own record of requests.

Screenshots: the driver saves every page it opened as ``NAME.png`` in an artifacts directory
before closing it, and every page still open when a step throws or its deadline passes as
``NAME-at-failure.png``. The directory is the test's ``browser_artifacts`` fixture
(tests/browser/conftest.py): ``<pytest tmp_path>/browser`` (pytest keeps the last three runs'
tmp dirs, under ``/tmp/pytest-of-$USER/``), or ``$LOOPGATE_BROWSER_ARTIFACTS/<test name>``
when that variable is set, a directory a CI job can upload. A failed browser test names the
directory in its report (a "browser artifacts" section), and a failed driver in its assertion.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.node_clients import NODE_DIR, node_clients, unavailable

# Debian's build; ./scripts/test installs it when it is missing.
CHROMIUM = Path("/usr/bin/chromium")
PAGE = b"<!doctype html><meta charset=utf-8><title>a web UI</title><p>loopgate browser test"
ARTIFACTS_ENV = "LOOPGATE_BROWSER_ARTIFACTS"


def _handler(files: dict[str, Path]) -> type[BaseHTTPRequestHandler]:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in files:
                body, kind = files[path].read_bytes(), "text/javascript; charset=utf-8"
            else:
                body, kind = PAGE, "text/html; charset=utf-8"
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test reports what matters

    return Page


@contextmanager
def page_server(files: dict[str, Path] | None = None) -> Iterator[int]:
    """A static page on 127.0.0.1 (a free port); yields the port. ``localhost`` reaches it too:
    Chromium tries the IPv4 loopback address when ``::1`` refuses. ``files`` maps a URL path to
    a JavaScript file served from disk at that path (read on each request): a module the page
    imports from its own origin, not the gateway's."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(files or {}))
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


def artifacts_dir(tmp_path: Path, test_name: str) -> Path:
    """Where a test's screenshots go: see the module's docstring."""
    root = os.environ.get(ARTIFACTS_ENV)
    path = Path(root) / test_name if root else tmp_path / "browser"
    path.mkdir(parents=True, exist_ok=True)
    return path


def drive_browser(
    config: dict[str, Any], artifacts: Path, timeout: float = 120, script: str = "browser-cors.mjs"
) -> subprocess.CompletedProcess[str]:
    """``node tests/node/SCRIPT CONFIG``, as it ended. CONFIG gets ``chromium``, ``artifacts``
    and ``timeoutMs``: the driver gives up (with a screenshot) 15 s before ``timeout``, which
    kills it."""
    node = node_clients()
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: ./scripts/test installs it (apt-get install chromium)")
    driver = {
        "chromium": str(CHROMIUM),
        "artifacts": str(artifacts),
        "timeoutMs": int(max(timeout - 15, 1) * 1000),
    }
    return subprocess.run(
        [node, str(NODE_DIR / script), json.dumps({**driver, **config})],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=NODE_DIR,
    )


def run_browser(
    config: dict[str, Any], artifacts: Path, timeout: float = 120, script: str = "browser-cors.mjs"
) -> dict[str, Any]:
    """What the pages saw (one JSON object); the driver must succeed."""
    done = drive_browser(config, artifacts, timeout, script)
    assert done.returncode == 0, f"{done.stderr[-3000:]}\nbrowser artifacts: {artifacts}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report
