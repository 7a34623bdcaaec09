"""A web UI in a real browser: headless Chromium, its page served from another loopback port
than the gateway's (a Vite dev page on :5173, say), calling the API with fetch and watching a
run with EventSource. The browser enforces CORS and reconnects event streams; nothing here
imitates either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.support import access_log, drive_browser, page_server, run_browser
from tests.gateway.harness import REPO, running_gateway

TOKEN = "browser-s3cret-0123"
RECORDINGS = sorted((REPO / "conformance" / "streams").glob("*.jsonl"))
# The @ag-ui/client bundle the console ships (scripts/build-console), as a page imports it.
AGUI_CLIENT = REPO / "gateway" / "console" / "static" / "vendor" / "agui-client.js"


def _stream(requests: list[tuple[str, str, int]], run_id: str) -> list[tuple[str, int]]:
    prefix = f"/v1/runs/{run_id}/events"
    return [
        (path, status)
        for method, path, status in requests
        if method == "GET" and path.startswith(prefix)
    ]


def _ended_once(follow: dict[str, Any]) -> None:
    """One connection that streamed, then the browser gave up for good after one reconnect."""
    summary = {k: v for k, v in follow.items() if k != "events"}
    assert follow["closed"], f"the EventSource never closed: {summary}"
    assert follow["opens"] == 1, summary
    # The end of the stream (the browser reconnects), then the 204 (it stops); and no event
    # of the run's ever reached onerror.
    assert follow["errors"] == 2, summary
    assert follow["errorMessages"] == 0, summary


def test_a_page_on_another_port_drives_runs_and_each_stream_ends(browser_artifacts: Path) -> None:
    with (
        page_server() as page_port,
        running_gateway(scripted_delay_s=0.005) as (base, _),
        access_log() as gateway_saw,
    ):
        page = f"http://127.0.0.1:{page_port}/"
        assert not base.endswith(f":{page_port}")
        report = run_browser({"open": {"gateway": base, "page": page}}, browser_artifacts)["open"]

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


def test_only_allowed_origins_reach_the_api_and_the_token_is_still_required(
    browser_artifacts: Path,
) -> None:
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
                },
                browser_artifacts,
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


def _sent_frames(base: str, run_id: str) -> list[list[bytes]]:
    """The lines of each event of a finished run's stream, as the gateway writes them (the
    keep-alive comment left out)."""
    body = httpx.get(f"{base}/v1/runs/{run_id}/events", timeout=30).content
    frames = [
        [ln for ln in block.split(b"\n") if ln and not ln.startswith(b":")]
        for block in body.split(b"\n\n")
    ]
    return [lines for lines in frames if lines]


def test_every_event_of_every_recording_reaches_a_pages_onmessage(browser_artifacts: Path) -> None:
    """An EventSource with an ``onmessage`` handler and nothing else, on each recording replayed
    as a run: every event, of every kind (``error`` and ones no list names), exactly as sent."""
    names = [path.stem for path in RECORDINGS]
    recorded = {
        path.stem: [json.loads(line) for line in path.read_text().splitlines()]
        for path in RECORDINGS
    }
    with (
        page_server() as page_port,
        # Recorded pace with short gaps: most runs are watched while they run.
        running_gateway(replay_max_gap_s=0.02) as (base, _),
        access_log() as gateway_saw,
    ):
        page = f"http://127.0.0.1:{page_port}/"
        report = run_browser(
            {"recordings": {"gateway": base, "page": page, "names": names}}, browser_artifacts
        )["recordings"]
        sent = {run["name"]: _sent_frames(base, run["id"]) for run in report["runs"]}

    assert [run["name"] for run in report["runs"]] == names
    seen_kinds: set[str] = set()
    for run in report["runs"]:
        name, run_id = run["name"], run["id"]
        assert run["status"] == 201, run
        # onerror: the end of the stream and the 204, never a LoopEvent; then CLOSED.
        _ended_once(run)
        envelopes = [json.loads(e["data"]) for e in run["events"]]
        # The recording, in order (a truncated one gets the hub's terminal event after it).
        expected = [(r["kind"], r["data"]) for r in recorded[name]]
        got = [(e["kind"], e["data"]) for e in envelopes[: len(expected)]]
        assert got == expected, f"{name}: onmessage got {len(envelopes)} of {len(expected)}"
        assert len(envelopes) == len(expected) + (name == "truncated"), name
        assert envelopes[-1]["kind"] == "completion", name
        assert [e["seq"] for e in envelopes] == list(range(1, len(envelopes) + 1)), name
        seen_kinds |= {e["kind"] for e in envelopes}
        # What the gateway sent: `id` and `data` alone, which the page got byte for byte, the
        # id as lastEventId, every one a "message".
        frames = sent[name]
        assert all(len(f) == 2 and f[0].startswith(b"id: ") for f in frames), (name, frames[0])
        assert all(f[1].startswith(b"data: ") for f in frames), (name, frames[0])
        received = [(e["type"], e["id"].encode(), e["data"].encode()) for e in run["events"]]
        assert received == [("message", f[0][4:], f[1][6:]) for f in frames], name
        assert [str(e["seq"]) for e in envelopes] == [e["id"] for e in run["events"]], name
        events = f"/v1/runs/{run_id}/events"
        stream = [(p, st) for m, p, st in gateway_saw.requests if m == "GET" and p == events]
        # The page's stream and its reconnect, then the test's own read of the bytes sent.
        assert stream == [(events, 200), (events, 204), (events, 200)], (name, stream)
        assert [r["status"] for r in report["streamRequests"][run_id]] == [200, 204], name
    every_kind = {r["kind"] for lines in recorded.values() for r in lines}
    assert seen_kinds == every_kind
    # Including the kind whose name would be the EventSource's own "error", and kinds no
    # client lists in advance.
    assert {"error", "x_memory_recall", "vendor.progress", "x_audit"} <= seen_kinds
    assert report["problems"] == []


@pytest.mark.parametrize("hang", [False, True], ids=["a-step-throws", "past-the-deadline"])
def test_a_failed_browser_step_leaves_a_screenshot(browser_artifacts: Path, hang: bool) -> None:
    """The driver's failure path, made to happen: a page step that throws, and one that never
    ends and meets the driver's deadline (which comes before the Python side's timeout)."""
    with page_server() as page_port:
        done = drive_browser(
            {"broken": {"page": f"http://127.0.0.1:{page_port}/", "hang": hang}},
            browser_artifacts,
            timeout=18 if hang else 60,
        )
    assert done.returncode == 1, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    why = "took longer than 3000 ms" if hang else "a step that fails on purpose"
    assert why in done.stderr, done.stderr[-2000:]
    shot = browser_artifacts / "broken-at-failure.png"
    assert f"screenshots: {shot}" in done.stderr, done.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert done.stdout == ""  # no report: the Python side never mistakes it for a pass


def test_a_page_runs_the_consoles_agui_client_against_another_port(browser_artifacts: Path) -> None:
    """``HttpAgent.runAgent()`` in a page, from the bundle the console ships, against /agui of a
    gateway on another loopback port: one turn of the scripted model (a tool call, then text)."""
    module = "/vendor/agui-client.js"
    with (
        page_server({module: AGUI_CLIENT}) as page_port,
        running_gateway() as (base, _),
        access_log() as gateway_saw,
    ):
        page = f"http://127.0.0.1:{page_port}/"
        report = run_browser(
            {
                "agui": {
                    "gateway": base,
                    "page": page,
                    "module": f"{page}{module[1:]}",
                    "prompt": "What time is it?",
                }
            },
            browser_artifacts,
        )["agui"]

    run = report["run"]
    assert run["failed"] is None, run
    types = run["types"]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    assert {"TOOL_CALL_START", "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT"} <= set(types), types
    new = run["newMessages"]
    calls = [c for m in new if m["role"] == "assistant" for c in m.get("toolCalls") or []]
    assert [c["function"]["name"] for c in calls] == ["clock"], new
    assert [m["toolCallId"] for m in new if m["role"] == "tool"] == [calls[0]["id"]], new
    texts = [m["content"] for m in new if m["role"] == "assistant" and m.get("content")]
    # The answer, after the tool's result: "It is 2026-…+00:00 (UTC) right now. …"
    assert texts and texts[-1].startswith("It is 20"), texts
    assert "(UTC) right now" in texts[-1], texts
    # The agent's messages: the prompt, then what the run added.
    assert run["messages"][0] == {"id": "u-1", "role": "user", "content": "What time is it?"}
    assert run["messages"][1:] == new
    assert report["problems"] == []
    # The module came from the page's origin; the run from the gateway's, after a preflight.
    origin = report["origin"]
    assert {"method": "GET", "url": f"{origin}{module}", "status": 200} in report["requests"]
    assert [r["status"] for r in report["requests"] if r["url"] == f"{base}/agui"] == [200]
    assert ("OPTIONS", "/agui", 200) in gateway_saw.requests
    assert ("POST", "/agui", 200) in gateway_saw.requests
