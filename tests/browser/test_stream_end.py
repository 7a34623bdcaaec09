"""The end of a native SSE stream, as an EventSource meets it: a reconnect at (or past) the end
of a finished run gets 204 No Content — the one answer that stops a browser reconnecting —
and every other request gets the stream as before."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import read_stream

pytestmark = pytest.mark.gateway(keepalive_s=0.3)
DONE = {"kind": "completion", "data": {"status": "completed"}}


def delta(text: str) -> dict[str, Any]:
    return {"kind": "content_delta", "data": {"delta": text}}


def push(base: str, run_id: str, events: list[dict[str, Any]]) -> None:
    body = "".join(json.dumps(e) + "\n" for e in events)
    pushed = httpx.post(f"{base}/v1/runs/{run_id}/events", content=body)
    assert pushed.status_code == 200, pushed.text


def start(base: str) -> str:
    started = httpx.post(f"{base}/v1/runs", json={"source": "ingest"})
    assert started.status_code == 201, started.text
    run_id: str = started.json()["id"]
    return run_id


@pytest.fixture(scope="module")
def finished(gateway: str) -> str:
    """A finished run of five events."""
    run_id = start(gateway)
    push(gateway, run_id, [delta(str(i)) for i in range(4)] + [DONE])
    return run_id


def events_url(base: str, run_id: str) -> str:
    return f"{base}/v1/runs/{run_id}/events"


@pytest.mark.parametrize(
    ("headers", "params"),
    [
        ({"last-event-id": "5"}, None),  # the reconnect after the last event
        ({"last-event-id": "9"}, None),  # past it
        (None, {"after": "5"}),  # ?after= is the same cursor
        ({"last-event-id": "5"}, {"after": "2"}),  # the header wins, as it does for a stream
    ],
)
def test_a_cursor_at_the_end_of_a_finished_run_gets_204(
    gateway: str, finished: str, headers: dict[str, str] | None, params: dict[str, str] | None
) -> None:
    answer = httpx.get(events_url(gateway, finished), headers=headers, params=params)
    assert answer.status_code == 204
    assert answer.content == b""


def test_an_older_cursor_gets_the_missing_events_and_then_the_end(
    gateway: str, finished: str
) -> None:
    rest = read_stream(gateway, finished, headers={"last-event-id": "3"})
    assert [int(e.id) for e in rest] == [4, 5]
    assert rest[-1].event == "message"
    assert json.loads(rest[-1].data)["kind"] == "completion"


def test_without_a_cursor_a_finished_run_is_sent_whole(gateway: str, finished: str) -> None:
    whole = read_stream(gateway, finished)
    assert [int(e.id) for e in whole] == [1, 2, 3, 4, 5]
    zero = read_stream(gateway, finished, headers={"last-event-id": "0"})
    assert [int(e.id) for e in zero] == [1, 2, 3, 4, 5]


def test_a_running_runs_stream_stays_open_at_its_newest_event(gateway: str) -> None:
    run_id = start(gateway)
    push(gateway, run_id, [delta("a"), delta("b")])
    with httpx.stream(
        "GET", events_url(gateway, run_id), headers={"last-event-id": "2"}, timeout=10
    ) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        # Open and idle: the keep-alive comes before any event.
        assert next(lines) == ": keep-alive"
        push(gateway, run_id, [DONE])
        rest = list(lines)
    data = rest[rest.index("id: 3") + 1]  # no `event:` line between
    assert data.startswith("data: ") and json.loads(data[6:])["kind"] == "completion"
    # Now the run is over: the same reconnect is told so.
    assert httpx.get(events_url(gateway, run_id), headers={"last-event-id": "3"}).status_code == 204


def test_an_unknown_run_is_still_a_404_with_a_cursor(gateway: str) -> None:
    answer = httpx.get(events_url(gateway, "run_nope"), headers={"last-event-id": "4"})
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"


def test_a_dropped_run_is_still_a_410_with_a_cursor() -> None:
    # Four runs of ~30 KiB each in 64 KiB: the oldest are dropped (docs/reliability.md).
    with running_gateway(max_retained_bytes=64 * 1024) as (base, _):
        ids = []
        for _ in range(4):
            run_id = start(base)
            push(base, run_id, [delta("x" * 30_000), DONE])
            ids.append(run_id)
        answer = httpx.get(events_url(base, ids[0]), headers={"last-event-id": "1"})
        assert answer.status_code == 410, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
