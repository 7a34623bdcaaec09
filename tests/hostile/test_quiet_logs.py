"""What clients do wrong costs the log a line, not a traceback each (issue 29, item 8): a real
`loopgate serve`, real clients doing it hundreds of times, and its log read afterwards."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as sync_connect

from tests.hostile.support import Child, serve, still_served
from tests.waiting import wait_until

# Per connection, whatever happens: the access lines of uvicorn (and its WebSocket open/close).
ACCESS = re.compile(r'" (\d{3})|\[accepted\]|connection (open|closed)')
MAX_OTHER_LINES = 20


def unexpected_lines(log: str) -> list[str]:
    """Every line but the start-up lines and a connection's own access lines."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if "runs go to" in line) + 1
    return [line for line in lines[start:] if not ACCESS.search(line)]


def local_port(response: httpx.Response) -> int:
    port: int = response.extensions["network_stream"].get_extra_info("client_addr")[1]
    return port


def assert_quiet(log: str) -> list[str]:
    assert "Traceback" not in log, log[-4000:]
    assert "ERROR" not in log, log[-4000:]
    other = unexpected_lines(log)
    assert len(other) <= MAX_OTHER_LINES, other
    return other


async def websocket_path(served: Child, endpoint: str, client: httpx.AsyncClient) -> str:
    if endpoint != "ingest":
        return endpoint
    run = (await client.post(f"{served.base}/v1/runs", json={"source": "ingest"})).json()
    return f"/v1/runs/{run['id']}/ingest?ack=1"


@pytest.mark.anyio
async def test_text_frames_that_are_not_utf8_cost_one_info_line_and_no_send_after_close(
    tmp_path: Path,
) -> None:
    """Each client sends a frame the endpoint answers with an error frame, then one that is
    not UTF-8 (the server closes with 1007 before it has written that answer: the send after
    the close that raised in uvicorn and in the ingest endpoint)."""
    per_endpoint = 100
    endpoints = ("/rpc/ws", "/agui/ws", "ingest")
    codes: list[int | None] = []
    with serve(tmp_path) as served:
        async with httpx.AsyncClient() as http:

            async def one(endpoint: str) -> None:
                path = await websocket_path(served, endpoint, http)
                async with connect(f"ws://127.0.0.1:{served.port}{path}") as ws:
                    await ws.send(json.dumps({"not": "what this endpoint takes"}))
                    await ws.send(b"\xff\xfe not UTF-8", text=True)
                    with anyio.fail_after(10):
                        try:
                            while True:
                                await ws.recv()
                        except ConnectionClosed:
                            pass
                    codes.append(ws.close_code)

            with anyio.fail_after(120):
                for endpoint in endpoints:
                    # 20 at a time: the point is the log, not the load.
                    for _ in range(per_endpoint // 20):
                        async with anyio.create_task_group() as tg:
                            for _ in range(20):
                                tg.start_soon(one, endpoint)
        log = served.log()
    assert codes == [1007] * per_endpoint * len(endpoints)
    other = assert_quiet(log)
    utf8 = [line for line in other if "not UTF-8" in line]
    assert len(utf8) == 1 and utf8[0].startswith("INFO:"), other


def test_sse_clients_that_stop_reading_are_dropped_without_an_error(tmp_path: Path) -> None:
    clients = 20
    with serve(tmp_path, "--write-timeout", "1") as served:
        run = httpx.post(f"{served.base}/v1/runs", json={"source": "ingest"}).json()
        # 20 MB of events: far more than the socket buffers of a client that reads nothing.
        delta = json.dumps({"kind": "content_delta", "data": {"delta": "x" * 50_000}})
        body = (delta + "\n").encode() * 400
        pushed = httpx.post(f"{served.base}/v1/runs/{run['id']}/events", content=body, timeout=60)
        assert pushed.status_code == 200
        small = httpx.HTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
        with httpx.Client(transport=small, timeout=30) as client:
            streams = []
            for _ in range(clients):
                request = client.build_request("GET", f"{served.base}/v1/runs/{run['id']}/events")
                response = client.send(request, stream=True)  # the head only: then no reading
                assert response.status_code == 200
                streams.append(response)
            ports = {local_port(response) for response in streams}
            assert still_served(served.port, ports) == clients
            # Cut off (the write timeout), their responses left unfinished: the server closes
            # them. (What a client then sees depends on the kernel: the rest of its buffers and
            # the end, a reset, or nothing at all for an orphan that was dropped.)
            wait_until(
                lambda: still_served(served.port, ports) == 0, 30, "the clients to be dropped"
            )
            for response in streams:
                response.close()
        log = served.log()
    other = assert_quiet(log)
    assert len([line for line in other if "stopped reading" in line]) == 1, other


FRAME_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Text frames as a fuzzer sends them: any bytes (mostly not UTF-8), or text that is.
frames = st.binary(min_size=1, max_size=200) | st.text(min_size=1, max_size=200).map(str.encode)


def test_fuzzed_text_frames_leave_no_error_in_the_log(tmp_path: Path) -> None:
    """The fuzzer of item 8, kept bounded: any bytes as a text frame on each WebSocket; a frame
    that is UTF-8 is answered on an open socket, one that is not closes it with 1007."""
    with serve(tmp_path) as served:

        @FRAME_SETTINGS
        @given(payload=frames, endpoint=st.sampled_from(["/rpc/ws", "/agui/ws", "ingest"]))
        def check(payload: bytes, endpoint: str) -> None:
            path = endpoint
            if endpoint == "ingest":
                run = httpx.post(f"{served.base}/v1/runs", json={"source": "ingest"}).json()
                path = f"/v1/runs/{run['id']}/ingest"
            with sync_connect(f"ws://127.0.0.1:{served.port}{path}", open_timeout=10) as ws:
                ws.send(payload, text=True)
                try:
                    payload.decode()
                except UnicodeDecodeError:
                    with pytest.raises(ConnectionClosed):
                        ws.recv(timeout=10)
                    assert ws.close_code == 1007
                    return
                if endpoint == "ingest" and payload.strip().startswith(b"{"):
                    ws.send('{"kind": "completion", "data": {"status": "completed"}}')
                assert json.loads(ws.recv(timeout=10))  # an answer, and the socket is open

        check()
        log = served.log()
    assert_quiet(log)


def exchange(port: int, request: bytes) -> bytes:
    """What the server answers a raw request, read until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)  # nothing more: the server answers, then closes
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


def test_malformed_requests_and_foreign_upgrades_cost_one_info_line_each(tmp_path: Path) -> None:
    """uvicorn logs a WARNING for every request h11 cannot parse and for every upgrade to
    something other than a WebSocket (``curl --http2``'s h2c): 300 of each, each on its own
    socket, leave one line for each kind that counts them, and every client its answer."""
    requests = 300
    broken = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nbroken header\r\n\r\n"
    h2c = (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
    )
    with serve(tmp_path) as served:
        for _ in range(requests):
            answer = exchange(served.port, broken)
            assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
            answer = exchange(served.port, h2c)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]  # served as HTTP/1.1
        log = served.log()
    other = assert_quiet(log)
    assert "Invalid HTTP request received." not in log
    assert "Unsupported upgrade request." not in log
    for words in ("malformed HTTP requests", "upgrades other than WebSocket"):
        counted = [line for line in other if words in line]
        assert len(counted) == 1 and counted[0].startswith("INFO:"), other
