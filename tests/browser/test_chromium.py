"""A web UI in a real browser: headless Chromium, its page served from another loopback port
than the gateway's (a Vite dev page on :5173, say), calling the API with fetch and watching a
run with EventSource. The browser enforces CORS and reconnects event streams; nothing here
imitates either."""

from __future__ import annotations

from typing import Any

from tests.browser.support import access_log, page_server, run_browser
from tests.gateway.harness import running_gateway

TOKEN = "browser-s3cret"


def _stream(requests: list[tuple[str, str, int]], run_id: str) -> list[tuple[str, int]]:
    prefix = f"/v1/runs/{run_id}/events"
    return [
        (path, status)
        for method, path, status in requests
        if method == "GET" and path.startswith(prefix)
    ]


def _ended_once(follow: dict[str, Any]) -> None:
    """One connection that streamed, then the browser gave up for good after one reconnect."""
    assert follow["closed"], f"the EventSource never closed: {follow}"
    assert follow["opens"] == 1, follow
    # The end of the stream (the browser reconnects), then the 204 (it stops).
    assert follow["errors"] == 2, follow


def test_a_page_on_another_port_drives_runs_and_each_stream_ends() -> None:
    with (
        page_server() as page_port,
        running_gateway(scripted_delay_s=0.005) as (base, _),
        access_log() as gateway_saw,
    ):
        page = f"http://127.0.0.1:{page_port}/"
        assert not base.endswith(f":{page_port}")
        report = run_browser({"open": {"gateway": base, "page": page}})["open"]

    calls = report["calls"]
    assert calls["start"].get("status") == 201, calls["start"]
    run_id = report["runId"]
    assert calls["start"] == {"status": 201, "location": f"/v1/runs/{run_id}", "id": run_id}
    assert calls["get"] == {"status": 200}
    assert calls["list"]["status"] == 200 and calls["list"]["runs"] >= 1
    assert calls["health"]["status"] == 200 and calls["health"]["body"]["status"] == "ok"
    assert calls["rpc"] == {"status": 200, "hasResult": True}
    # The page can read an error's problem body, not just see a failed fetch.
    assert calls["steerMissing"] == {"status": 404, "type": 404}
    assert calls["agui"] == {"status": 200, "first": "RUN_STARTED", "last": "RUN_FINISHED"}

    # A finished run, watched from the start: all of it, then one reconnect that gets 204.
    last = report["lastSeq"]
    assert report["state"] == "finished" and last > 3
    assert report["follow"]["ids"] == list(range(1, last + 1))
    _ended_once(report["follow"])
    # From an older cursor: the missing events, then the same end.
    assert report["resume"]["ids"] == list(range(report["resumeFrom"] + 1, last + 1))
    _ended_once(report["resume"])
    # Watched live while the page pushes its end: the same.
    live = report["liveRunId"]
    assert report["followLive"]["pushed"] == 200
    assert report["followLive"]["ids"] == [1, 2]
    _ended_once(report["followLive"])

    # What the gateway itself answered: two requests per EventSource, never a third.
    events = f"/v1/runs/{run_id}/events"
    after = f"{events}?after={report['resumeFrom']}"
    assert _stream(gateway_saw.requests, run_id) == [
        (events, 200),
        (events, 204),
        (after, 200),
        (after, 204),
    ]
    live_events = f"/v1/runs/{live}/events"
    assert _stream(gateway_saw.requests, live) == [(live_events, 200), (live_events, 204)]
    # And what the browser says it sent.
    statuses = [r["status"] for r in report["streamRequests"]]
    assert statuses == [200, 204, 200, 204]
    # Preflights were answered, never refused.
    preflights = [(p, s) for m, p, s in gateway_saw.requests if m == "OPTIONS"]
    assert {p for p, _ in preflights} >= {"/v1/runs", "/rpc", "/agui", live_events}
    assert all(s == 200 for _, s in preflights), preflights


def test_only_allowed_origins_reach_the_api_and_the_token_is_still_required() -> None:
    with page_server() as page_port:
        allowed = f"http://localhost:{page_port}"
        refused = f"http://127.0.0.1:{page_port}"
        with (
            running_gateway(token=TOKEN, allowed_origins=[allowed]) as (base, _),
            access_log() as gateway_saw,
        ):
            report = run_browser(
                {
                    "guarded": {
                        "gateway": base,
                        "token": TOKEN,
                        "allowedPage": f"{allowed}/",
                        "refusedPage": f"{refused}/",
                    }
                }
            )["guarded"]

    ok, no = report["allowed"], report["refused"]
    assert (ok["origin"], no["origin"]) == (allowed, refused)
    # The preflight passed without the token; the request itself needed it.
    assert ok["withToken"]["status"] == 201
    assert ok["withToken"]["location"].startswith("/v1/runs/run_")
    assert ok["withoutToken"] == {"status": 401, "location": None}
    assert ok["read"] == {"status": 200}
    # Another origin of the same machine, not on the list: the browser refuses every call.
    for call in ("withToken", "withoutToken", "read"):
        assert no[call]["error"] == "TypeError", no[call]
    assert any("blocked by CORS policy" in line for line in no["console"]), no["console"]

    posts = [s for m, p, s in gateway_saw.requests if (m, p) == ("POST", "/v1/runs")]
    assert sorted(posts) == [201, 401]  # the refused page's POSTs never left the browser
    refusals = [s for m, p, s in gateway_saw.requests if (m, p) == ("OPTIONS", "/v1/runs")]
    assert refusals.count(403) == 2, gateway_saw.requests
    # A GET needs no preflight: it reached the gateway, the browser hid the answer.
    assert [s for m, p, s in gateway_saw.requests if p == "/healthz"] == [200, 200]
