"""The native HTTP API and SSE against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
import websockets.exceptions
import websockets.sync.client as ws_client
from httpx_sse import aconnect_sse
from httpx_sse._decoders import SSEDecoder

from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import aread_stream, envelopes, read_stream
from tests.waiting import until, wait_until

pytestmark = pytest.mark.gateway(max_active_runs=40, keepalive_s=0.3)


def start(base: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    response = httpx.post(f"{base}/v1/runs", json=body, **kw)
    assert response.status_code == 201, response.text
    return response.json()


def push(base: str, run_id: str, events: list[dict[str, Any]], end: bool = False) -> httpx.Response:
    body = "".join(json.dumps(e) + "\n" for e in events)
    params = {"end": "1"} if end else {}
    return httpx.post(f"{base}/v1/runs/{run_id}/events", content=body, params=params)


def delta(text: str) -> dict[str, Any]:
    return {"kind": "content_delta", "data": {"delta": text}}


DONE = {"kind": "completion", "data": {"status": "completed"}}


def run_of(base: str, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = httpx.get(f"{base}/v1/runs/{run_id}").json()
    return run


def assert_problem(response: httpx.Response, status: int, *needles: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status
    for needle in needles:
        assert needle in body["detail"], body
    assert "Traceback" not in response.text
    return body


def test_loop_run_streams_to_a_terminal_completion(gateway: str) -> None:
    response = httpx.post(f"{gateway}/v1/runs", json={"input": "What time is it in Paris?"})
    assert response.status_code == 201
    run = response.json()
    assert response.headers["location"] == f"/v1/runs/{run['id']}"
    assert run["source"] == "loop" and run["state"] == "running"

    with httpx.stream("GET", f"{gateway}/v1/runs/{run['id']}/events", timeout=20) as raw:
        assert raw.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert raw.headers["cache-control"] == "no-cache"
        assert raw.headers["x-accel-buffering"] == "no"
        body = b"".join(raw.iter_bytes())
    assert b"\r" not in body  # LF framing only
    # Unnamed events, `id` and `data` only: an EventSource dispatches each as "message".
    frames = [
        [ln for ln in f.split(b"\n") if ln and not ln.startswith(b":")] for f in body.split(b"\n\n")
    ]
    frames = [f for f in frames if f]  # keep-alive comments are no events
    assert all(len(f) == 2 and f[0].startswith(b"id: ") for f in frames), frames[:3]
    assert all(f[1].startswith(b"data: {") for f in frames)

    events = read_stream(gateway, run["id"])
    envs = envelopes(events)
    assert [int(e.id) for e in events] == [e["seq"] for e in envs] == list(range(1, len(envs) + 1))
    assert {e.event for e in events} == {"message"}
    assert envs[-1]["kind"] == "completion" and envs[-1]["data"]["status"] == "completed"
    kinds = {e["kind"] for e in envs}
    assert {"llm_request", "content_delta", "tool_call_start", "tool_call_result"} <= kinds
    finished = httpx.get(f"{gateway}/v1/runs/{run['id']}").json()
    assert finished["state"] == "finished" and finished["last_seq"] == len(envs)


def test_many_concurrent_subscribers_get_identical_streams(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]
    results: list[list[str]] = []

    async def main() -> None:
        # Live fan-out: every subscriber is attached before the first event. A stream's
        # status line comes once its subscription exists, so entering aconnect_sse says so.
        attached = anyio.Semaphore(0)
        async with httpx.AsyncClient(base_url=gateway, timeout=20) as client:

            async def watch() -> None:
                async with aconnect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
                    attached.release()
                    results.append([e.data async for e in source.aiter_sse()])

            async with anyio.create_task_group() as tg:
                for _ in range(25):
                    tg.start_soon(watch)
                for _ in range(25):
                    await attached.acquire()
                for batch in range(5):
                    await client.post(
                        f"/v1/runs/{run_id}/events",
                        content="".join(
                            json.dumps(delta(f"{batch}-{i}")) + "\n" for i in range(40)
                        ),
                    )
                await client.post(f"/v1/runs/{run_id}/events", content=json.dumps(DONE))

    anyio.run(main)
    assert len(results) == 25
    assert all(r == results[0] for r in results)
    assert len(results[0]) == 201


def test_late_subscriber_and_resume_with_last_event_id(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]
    assert push(gateway, run_id, [delta(str(i)) for i in range(30)]).status_code == 200

    # Read 10 events, then drop the connection mid-stream.
    seen: list[int] = []
    with httpx.Client(base_url=gateway, timeout=10) as client:
        from httpx_sse import connect_sse

        with connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
            for event in source.iter_sse():
                seen.append(int(event.id))
                if len(seen) == 10:
                    break
    assert push(gateway, run_id, [delta("more"), DONE]).status_code == 200

    rest = read_stream(gateway, run_id, headers={"last-event-id": str(seen[-1])})
    assert [int(e.id) for e in rest] == list(range(11, 33))
    # Last-Event-ID wins over ?after= (a browser reconnects to the original URL).
    again = read_stream(gateway, run_id, headers={"last-event-id": "30"}, params={"after": 2})
    assert [int(e.id) for e in again] == [31, 32]
    assert [int(e.id) for e in read_stream(gateway, run_id, params={"after": 31})] == [32]
    late = read_stream(gateway, run_id)
    assert [int(e.id) for e in late] == list(range(1, 33))


def test_keepalive_comment_on_an_idle_stream(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]
    with httpx.stream("GET", f"{gateway}/v1/runs/{run_id}/events", timeout=5) as raw:
        started = time.monotonic()
        lines = raw.iter_lines()
        assert next(lines) == ": keep-alive"
        assert 0.2 < time.monotonic() - started < 2
    push(gateway, run_id, [DONE])


def test_keepalives_between_events_are_no_events_to_a_real_parser(gateway: str) -> None:
    """httpx-sse dispatches an event at every blank line once it has seen an id; a keep-alive
    between two events must not become one (keep-alives come every 0.3 s here)."""
    run_id = start(gateway, {"source": "ingest"})["id"]
    push(gateway, run_id, [delta("first")])
    lines: list[str] = []
    with httpx.stream("GET", f"{gateway}/v1/runs/{run_id}/events", timeout=10) as raw:
        wire = raw.iter_lines()
        while lines.count(": keep-alive") < 2:  # the wire shows when they came
            lines.append(next(wire))
        push(gateway, run_id, [DONE])
        lines.extend(wire)
    decoder = SSEDecoder()
    events = [e for e in map(decoder.decode, lines) if e is not None]
    assert [e.event for e in events] == ["message", "message"]
    assert [e["kind"] for e in envelopes(events)] == ["content_delta", "completion"]


def test_a_client_that_never_reads_is_cut_off_while_a_fast_one_finishes() -> None:
    with running_gateway(subscriber_max_lag=200, max_batch=64) as (base, _):
        run_id = start(base, {"source": "ingest"})["id"]
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        stuck.sendall(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        wait_until(lambda: run_of(base, run_id)["subscribers"] == 1, 10, "the stuck subscriber")

        fast: list[Any] = []
        fast_done = anyio.Event()

        async def main() -> None:
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:

                async def watch() -> None:
                    fast.extend(await aread_stream(client, run_id))
                    fast_done.set()

                async def subscribers() -> int:
                    count: int = (await client.get(f"/v1/runs/{run_id}")).json()["subscribers"]
                    return count

                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch)
                    with anyio.fail_after(10):
                        await until(subscribers, lambda count: count == 2)  # the fast one too
                    blob = "x" * 10_000
                    started = time.monotonic()
                    for _ in range(10):
                        body = "".join(json.dumps(delta(blob)) + "\n" for _ in range(100))
                        await client.post(f"/v1/runs/{run_id}/events", content=body)
                    await client.post(f"/v1/runs/{run_id}/events", content=json.dumps(DONE))
                    with anyio.fail_after(10):
                        await fast_done.wait()
                    assert time.monotonic() - started < 10

        anyio.run(main)
        assert [int(e.id) for e in fast] == list(range(1, 1002))
        assert httpx.get(f"{base}/v1/runs/{run_id}").json()["subscribers"] == 0
        stuck.close()


def test_ingest_ndjson_keeps_the_valid_prefix_and_names_the_bad_line(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]

    def body() -> Iterator[bytes]:  # streamed with chunked transfer encoding
        yield (json.dumps(delta("a")) + "\n").encode()
        yield (json.dumps(delta("b")) + "\n\n").encode()
        # Only a broken envelope is refused (odd payload fields are carried: tests/tolerance).
        yield b'{"kind": "content_delta", "data": [5]}\n'
        yield (json.dumps(delta("never")) + "\n").encode()

    response = httpx.post(f"{gateway}/v1/runs/{run_id}/events", content=body())
    problem = assert_problem(response, 422, "line 4", "`data`", "2 earlier events")
    assert problem["line"] == 4 and problem["accepted"] == 2 and problem["last_seq"] == 2
    response = push(gateway, run_id, [delta("c")], end=True)
    assert response.status_code == 200 and response.json()["accepted"] == 1
    envs = envelopes(read_stream(gateway, run_id))
    assert [e["data"].get("delta") for e in envs[:3]] == ["a", "b", "c"]
    assert envs[-1]["data"] == {"status": "failed", "reason": "truncated"}
    assert_problem(push(gateway, run_id, [delta("late")]), 409, "already finished")
    after_end = start(gateway, {"source": "ingest"})["id"]
    problem = assert_problem(
        push(gateway, after_end, [delta("a"), DONE, delta("b")]), 409, "line 3", "already finished"
    )
    assert problem["accepted"] == 2 and problem["last_seq"] == 2
    assert_problem(push(gateway, run_id, ["{bad"]), 409)


def test_ingest_over_websocket_with_commands(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]
    url = gateway.replace("http", "ws") + f"/v1/runs/{run_id}/ingest"
    with ws_client.connect(url) as ws:
        ws.send(json.dumps(delta("hello ")))
        ws.send('{"kind": "tool_call_start", "data": 1}')
        error = json.loads(ws.recv(timeout=5))
        assert error["type"] == "error" and error["frame"] == 2 and "`data`" in error["detail"]
        ws.send(json.dumps({"kind": "my.custom", "data": {"anything": [1, 2]}}))
        steer = httpx.post(f"{gateway}/v1/runs/{run_id}/steer", json={"content": "go left"})
        assert steer.status_code == 202
        assert json.loads(ws.recv(timeout=5)) == {
            "type": "command",
            "command": "steer",
            "content": "go left",
        }
        ws.send(json.dumps(DONE))
        assert json.loads(ws.recv(timeout=5)) == {"type": "end", "frame": 4, "seq": 3}
    envs = envelopes(read_stream(gateway, run_id))
    assert [e["kind"] for e in envs] == ["content_delta", "my.custom", "completion"]
    assert envs[1]["data"] == {"anything": [1, 2]}


def test_ingest_socket_closed_early_truncates_the_run(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]
    with ws_client.connect(gateway.replace("http", "ws") + f"/v1/runs/{run_id}/ingest") as ws:
        ws.send(json.dumps(delta("x")))
    envs = envelopes(read_stream(gateway, run_id))
    assert envs[-1]["data"] == {"status": "failed", "reason": "truncated"}


def test_websocket_origin_is_checked(gateway: str) -> None:
    run_id = start(gateway, {"source": "ingest"})["id"]
    url = gateway.replace("http", "ws") + f"/v1/runs/{run_id}/ingest"
    with pytest.raises(websockets.exceptions.InvalidStatus) as info:
        ws_client.connect(url, origin="https://evil.example")
    assert info.value.response.status_code == 403
    with ws_client.connect(url, origin="http://localhost:3000") as ws:
        ws.send(json.dumps(DONE))


def test_cancel_and_steer_a_loop_run() -> None:
    with running_gateway(scripted_delay_s=0.01) as (base, _):
        run_id = start(base, {"input": "hello there"})["id"]
        with httpx.Client(base_url=base, timeout=20) as client:
            from httpx_sse import connect_sse

            with connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
                kinds = []
                for event in source.iter_sse():
                    kind = json.loads(event.data)["kind"]
                    kinds.append(kind)
                    if kind == "content_delta" and "steered" not in kinds:
                        kinds.append("steered")
                        assert (
                            client.post(
                                f"/v1/runs/{run_id}/steer", json={"content": "be brief"}
                            ).status_code
                            == 202
                        )
                    if kind == "content_delta" and kinds.count("content_delta") == 3:
                        response = client.post(f"/v1/runs/{run_id}/cancel")
                        assert response.status_code == 202, (response.text, kinds)
                        assert response.json()["accepted"] is True
                last = json.loads(event.data)
        assert last["kind"] == "completion" and last["data"]["status"] == "cancelled"
        again = httpx.post(f"{base}/v1/runs/{run_id}/cancel")
        assert again.status_code == 200
        assert again.json()["accepted"] is False and "already finished" in again.json()["detail"]


def test_steering_is_applied_at_the_next_round() -> None:
    with running_gateway(scripted_delay_s=0.01) as (base, _):
        run_id = start(base, {"input": "What is 6 times 7 and the time?"})["id"]
        wait_until(lambda: run_of(base, run_id)["last_seq"] > 0, 10, "the run's first event")
        assert (
            httpx.post(
                f"{base}/v1/runs/{run_id}/steer", json={"content": "answer in French"}
            ).status_code
            == 202
        )
        envs = envelopes(read_stream(base, run_id))
        steers = [e for e in envs if e["kind"] == "steer"]
        assert steers and steers[0]["data"]["content"] == "answer in French"
        # A tool that hangs keeps this run alive while it is steered.
        slow = start(base, {"input": "slow tool", "config": {"max_steer_chars": 100}})["id"]
        too_long = httpx.post(f"{base}/v1/runs/{slow}/steer", json={"content": "x" * 101})
        assert_problem(too_long, 422, "100")
        httpx.post(f"{base}/v1/runs/{slow}/cancel")


def test_errors_have_problem_bodies() -> None:
    with running_gateway(
        max_body_bytes=1000,
        max_active_runs=2,
        max_queued_runs=0,
        max_subscribers_per_run=1,
        scripted_delay_s=0.05,
    ) as (base, _):
        post = lambda body, **kw: httpx.post(f"{base}/v1/runs", content=body, **kw)  # noqa: E731
        assert_problem(post(b"{nope"), 400, "malformed JSON")
        assert_problem(post(b""), 400, "empty")
        assert_problem(post(b'{"input": 5}'), 422, "`input`")
        assert_problem(post(b'{"inptu": "hi"}'), 422, "unknown field `inptu`")
        assert_problem(post(b'{"input": "hi", "config": {"max_rounds": 0}}'), 422, "max_rounds")
        assert_problem(post(b'{"replay": "../../etc/passwd"}'), 422, "recording")
        assert_problem(post(b'{"source": "ingest", "replay": "x"}'), 422, "not both")
        assert_problem(post(b'{"input": "' + b"x" * 2000 + b'"}'), 413, "1000 bytes")
        assert_problem(httpx.get(f"{base}/v1/runs/nope"), 404, "no run with id 'nope'")
        assert_problem(httpx.get(f"{base}/v1/runs/nope/events"), 404, "nope")
        assert_problem(httpx.post(f"{base}/v1/runs/nope/cancel"), 404)
        assert_problem(httpx.get(f"{base}/nothing"), 404, "no endpoint")
        # Under the native API's own paths too (the rest of /v1 is OpenAI's: tests/openai).
        assert_problem(httpx.get(f"{base}/v1/runs/nope/nothing"), 404, "no endpoint")
        assert_problem(httpx.get(f"{base}/v1/threads/t/nothing/more"), 404, "no endpoint")
        assert_problem(httpx.get(f"{base}/v1/runs?limit=0"), 400, "limit")
        run_a = start(base, {"input": "a b c d"})["id"]
        start(base, {"source": "ingest"})
        too_many = post(b'{"input": "x"}')
        assert_problem(too_many, 429, "too many active runs")
        assert too_many.headers["retry-after"] == "1"
        assert_problem(
            httpx.get(f"{base}/v1/runs/{run_a}/events", headers={"last-event-id": "x"}),
            400,
            "cursor",
        )
        with httpx.stream("GET", f"{base}/v1/runs/{run_a}/events", timeout=10) as first:
            assert first.status_code == 200
            assert_problem(httpx.get(f"{base}/v1/runs/{run_a}/events"), 429, "subscribers")
        assert_problem(httpx.post(f"{base}/v1/runs/{run_a}/steer", content=b"{}"), 422, "content")


def test_contract_health_and_listing(gateway: str) -> None:
    contract = httpx.get(f"{gateway}/v1/contract").json()
    assert contract["coreloopApi"] == 1 and len(contract["eventKinds"]) == 15
    health = httpx.get(f"{gateway}/healthz").json()
    assert health["status"] == "ok" and "native" in health["adapters"]
    ids = [start(gateway, {"source": "ingest", "metadata": {"n": i}})["id"] for i in range(3)]
    listed = httpx.get(f"{gateway}/v1/runs", params={"limit": 3}).json()["runs"]
    assert [r["id"] for r in listed] == ids[::-1]
    loop_run = start(gateway, {"input": "hi", "thread_id": "thread-x"})
    by_thread = httpx.get(f"{gateway}/v1/runs", params={"thread_id": "thread-x"}).json()["runs"]
    assert [r["id"] for r in by_thread] == [loop_run["id"]]
    assert by_thread[0]["input"] == [{"role": "user", "content": "hi"}]
    for run_id in ids:
        push(gateway, run_id, [DONE])


def test_replay_run_over_http(gateway: str) -> None:
    import pathlib

    names = sorted(p.stem for p in pathlib.Path("conformance/streams").glob("*.jsonl"))
    assert names, "conformance streams are missing"
    run_id = start(gateway, {"replay": names[0]})["id"]
    envs = envelopes(read_stream(gateway, run_id))
    assert envs[-1]["kind"] == "completion"


def test_token_is_required_everywhere_but_healthz() -> None:
    bearer = {"authorization": "Bearer s3cret-0123456789"}
    with running_gateway(token="s3cret-0123456789") as (base, _):
        assert httpx.get(f"{base}/healthz").status_code == 200
        assert_problem(httpx.get(f"{base}/v1/runs"), 401, "bearer token")
        assert_problem(httpx.get(f"{base}/v1/runs", headers={"authorization": "Bearer wrong"}), 401)
        ok = httpx.get(f"{base}/v1/runs", headers=bearer)
        assert ok.status_code == 200
        run = start(base, {"source": "ingest"}, headers=bearer)
        url = base.replace("http", "ws") + f"/v1/runs/{run['id']}/ingest"
        with pytest.raises(websockets.exceptions.InvalidStatus):
            ws_client.connect(url)
        with ws_client.connect(url + "?token=s3cret-0123456789") as ws:
            ws.send(json.dumps(DONE))


def test_browsers_from_allowed_origins_get_cors() -> None:
    origin = "https://app.example"
    with running_gateway(allowed_origins=[origin], token="t0k-0123456789abc") as (base, _):
        preflight = httpx.options(
            f"{base}/agui",
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, authorization",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == origin
        started = httpx.post(
            f"{base}/v1/runs",
            json={"source": "ingest"},
            headers={"origin": origin, "authorization": "Bearer t0k-0123456789abc"},
        )
        assert started.headers["access-control-allow-origin"] == origin
        assert "location" in started.headers["access-control-expose-headers"].lower()
        other = httpx.options(
            f"{base}/agui",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert "access-control-allow-origin" not in other.headers


def test_cross_site_posts_are_refused(gateway: str) -> None:
    evil = {"origin": "https://evil.example"}
    refused = httpx.post(f"{gateway}/v1/runs", json={"input": "hi"}, headers=evil)
    body = assert_problem(refused, 403, "https://evil.example", "--allowed-origin")
    assert body["title"] == "Forbidden"
    assert httpx.post(f"{gateway}/agui", content=b"{}", headers=evil).status_code == 403
    assert httpx.get(f"{gateway}/v1/runs", headers=evil).status_code == 200  # reads are fine
    local = {"origin": "http://localhost:5173"}
    assert (
        httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}, headers=local).status_code
        == 201
    )


def test_ingest_past_the_byte_limit_is_a_413_and_ends_the_run() -> None:
    with running_gateway(max_run_bytes=2000) as (base, _):
        run_id = start(base, {"source": "ingest"})["id"]
        response = push(base, run_id, [delta("y" * 500) for _ in range(5)])
        problem = assert_problem(response, 413, "line 4", "limit of 2000 bytes")
        assert problem["accepted"] == 3
        run = httpx.get(f"{base}/v1/runs/{run_id}").json()
        assert (run["state"], run["status"]) == ("finished", "failed")


def test_a_stalled_client_is_cut_off_by_the_write_timeout_and_can_resume(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Lag never trips (the bound is huge); only the write timeout notices the stall.
    with running_gateway(subscriber_max_lag=10**9, write_timeout_s=0.5) as (base, _):
        run_id = start(base, {"source": "ingest"})["id"]
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        stuck.sendall(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        blob = "z" * 10_000
        for _ in range(6):
            push(base, run_id, [delta(blob) for _ in range(100)])
        push(base, run_id, [DONE])
        wait_until(lambda: run_of(base, run_id)["subscribers"] == 0, 10, "the stalled one cut off")
        stuck.close()
        resumed = read_stream(base, run_id, headers={"last-event-id": "550"})
        assert [int(e.id) for e in resumed] == list(range(551, 602))
    assert "event stream" not in caplog.text  # ended quietly, not as a server error
