"""The console's files over HTTP, and what a token does to them and to the browser's
header-less connections (EventSource, WebSocket). The console itself: tests/browser."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets.exceptions
from websockets.sync import client as ws_client

from tests.gateway.harness import REPO, running_gateway

STATIC = REPO / "gateway" / "console" / "static"
TOKEN = "c0nsole-t0ken-0123"
BEARER = {"authorization": f"Bearer {TOKEN}"}
DONE = {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


def test_the_page_and_its_modules_are_served_with_their_types() -> None:
    with running_gateway() as (base, _):
        page = httpx.get(f"{base}/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["cache-control"] == "no-cache"
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        for name in ("console.js", "stream.js", "timeline.js", "agent.js", "vendor/agui-client.js"):
            module = httpx.get(f"{base}/console/{name}")
            assert module.status_code == 200, name
            # Browsers refuse to run a module served as anything but JavaScript.
            assert "javascript" in module.headers["content-type"], name
            assert module.content == (STATIC / name).read_bytes()
            assert module.headers["x-content-type-options"] == "nosniff", name
        assert httpx.head(f"{base}/").status_code == 200
        missing = httpx.get(f"{base}/console/nothing.js")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/problem+json"
        # Outside the static directory: nothing of the package is reachable.
        escaped = httpx.get(f"{base}/console/..%2f__init__.py")
        assert escaped.status_code == 404
        assert httpx.post(f"{base}/").status_code == 405


def test_with_a_token_the_files_are_open_and_everything_else_is_not() -> None:
    with running_gateway(token=TOKEN) as (base, _):
        assert httpx.get(f"{base}/").status_code == 200
        assert httpx.get(f"{base}/console/console.js").status_code == 200
        assert httpx.get(f"{base}/v1/runs").status_code == 401
        # Only the browser's header-less connections may carry the token in the query.
        assert httpx.get(f"{base}/v1/runs?token={TOKEN}").status_code == 401
        assert httpx.get(f"{base}/v1/runs", headers=BEARER).status_code == 200
        # POST on a console path is no way around the token.
        assert httpx.post(f"{base}/console/x", json={}).status_code == 401

        created = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}, headers=BEARER).json()
        events = f"{base}/v1/runs/{created['id']}/events"
        pushed = httpx.post(events, content=json.dumps(DONE) + "\n", headers=BEARER)
        assert pushed.status_code in (200, 202), pushed.text
        assert httpx.get(events).status_code == 401
        assert httpx.get(f"{events}?token=wrong").status_code == 401
        # EventSource: the token in the query.
        streamed = httpx.get(f"{events}?token={TOKEN}")
        assert streamed.status_code == 200
        assert b'"kind":"completion"' in streamed.content
        # Pushing is no header-less browser connection: the query does not do for it.
        refused = httpx.post(f"{events}?token={TOKEN}", content=json.dumps(DONE) + "\n")
        assert refused.status_code == 401

        ws_url = base.replace("http", "ws") + "/agui/ws"
        with pytest.raises(websockets.exceptions.InvalidStatus):
            ws_client.connect(ws_url)
        with ws_client.connect(f"{ws_url}?token={TOKEN}") as ws:
            ws.send(json.dumps({"type": "cancel"}))
            assert json.loads(ws.recv(timeout=10))["code"] == "no_active_run"


def test_no_console_serves_nothing_at_the_root() -> None:
    with running_gateway(console=False) as (base, _):
        assert httpx.get(f"{base}/").status_code == 404
        assert httpx.get(f"{base}/console/console.js").status_code == 404
        assert httpx.get(f"{base}/healthz").status_code == 200
