"""A run an external loop pushes (``source: ingest``) belongs to whoever created it: only that
principal (or an admin) pushes into it, over HTTP or WebSocket, and sees it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import websockets.sync.client as ws_client
from websockets.exceptions import InvalidStatus

from tests.gateway.harness import running_gateway
from tests.identity import principals

EVENTS = [
    {"kind": "content_delta", "data": {"delta": "pushed by alice"}},
    {"kind": "completion", "data": {"status": "completed", "reason": "stop"}},
]


def ndjson(events: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_an_ingest_run_is_owned_by_the_principal_that_pushes_it(tmp_path: Path) -> None:
    keys = principals.write_test_keys(tmp_path / "keys.json")
    alice, bob, root, viewer = keys["alice"], keys["bob"], keys["root"], keys["viewer"]
    with (
        running_gateway(keys_file=str(tmp_path / "keys.json")) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        created = http.post("/v1/runs", json={"source": "ingest"}, headers=alice.headers)
        assert created.status_code == 201, created.text
        run = created.json()
        assert run["owner"] == {"subject": "alice", "tenant": "acme"}
        run_id = run["id"]
        push = f"/v1/runs/{run_id}/events"

        # Someone else's run is not found, to a pusher as to a reader; a reader may not push.
        for stranger in (bob, viewer):
            refused = http.post(push, content=ndjson(EVENTS[:1]), headers=stranger.headers)
            assert refused.status_code == 404, refused.text
        # A WebSocket upgrade is refused alike for someone else's run and for no run at all
        # (403: a refused handshake), so bob learns nothing of alice's.
        ws_url = base.replace("http://", "ws://") + f"/v1/runs/{run_id}/ingest"
        for url in (ws_url, ws_url.replace(run_id, "run_nobody")):
            with pytest.raises(InvalidStatus) as refused_ws:
                ws_client.connect(url, additional_headers=bob.headers, open_timeout=5)
            assert refused_ws.value.response.status_code == 403

        # The owner pushes the first event over HTTP, the terminal one over WebSocket (closing
        # that socket earlier would end the run as truncated).
        pushed = http.post(push, content=ndjson(EVENTS[:1]), headers=alice.headers)
        assert pushed.status_code == 200, pushed.text
        with ws_client.connect(ws_url, additional_headers=alice.headers, open_timeout=5) as ws:
            ws.send(json.dumps(EVENTS[1]))
            assert json.loads(ws.recv(timeout=10))["type"] == "end"
        assert http.get(f"/v1/runs/{run_id}", headers=alice.headers).json()["status"] == "completed"

        events = http.get(f"{push}?stream=false", headers=alice.headers)
        assert events.status_code == 200, events.text
        assert "pushed by alice" in events.text
        for who, sees in ((alice, True), (root, True), (bob, False), (viewer, False)):
            listed = [r["id"] for r in http.get("/v1/runs", headers=who.headers).json()["runs"]]
            assert (run_id in listed) is sees, who.name
