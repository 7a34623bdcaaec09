"""Numbers from clients: ASCII digits, bounded length, our own 400 message, everywhere."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from loopgate.adapters.shared.numbers import MAX_INT, ascii_int
from tests.gateway.sse_client import envelopes, read_stream

HUGE = "9" * 4300  # past CPython's int/str conversion limit: int() raises
CURSOR_400 = "the resume cursor must be a non-negative integer of at most 19 ASCII digits"


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("007", 7),
        (str(MAX_INT), MAX_INT),
        (str(MAX_INT + 1), None),
        ("²", None),
        ("٣", None),  # Arabic-Indic digit three: isdigit() and int() accept it
        ("1²", None),
        ("", None),
        ("-1", None),
        (" 1", None),
        ("+1", None),
        (HUGE, None),
        (None, None),
    ],
)
def test_ascii_int(raw: str | None, value: int | None) -> None:
    assert ascii_int(raw) == value


def raw_get(base: str, target: str, headers: dict[str, bytes]) -> tuple[int, dict[str, Any]]:
    """A GET whose header bytes go on the wire as given (latin-1 '²' is the byte 0xb2)."""
    host, port = base.removeprefix("http://").split(":")
    head = f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n".encode()
    head += b"".join(k.encode() + b": " + v + b"\r\n" for k, v in headers.items()) + b"\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body)


def finished_run(base: str) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"replay": "plain-answer"})
    run_id = str(response.json()["id"])
    read_stream(base, run_id)
    return run_id


@pytest.mark.parametrize("cursor", ["²".encode("latin-1"), "²".encode(), HUGE.encode(), b"-1"])
def test_last_event_id(gateway: str, cursor: bytes) -> None:
    run_id = finished_run(gateway)
    status, body = raw_get(gateway, f"/v1/runs/{run_id}/events", {"Last-Event-ID": cursor})
    assert status == 400 and body["detail"].startswith(CURSOR_400)
    assert len(body["detail"]) < 200  # a 4,300-digit cursor is not echoed back whole


def test_after_and_limit_query_parameters(gateway: str) -> None:
    run_id = finished_run(gateway)
    for params in ({"after": "²"}, {"after": HUGE}):
        response = httpx.get(f"{gateway}/v1/runs/{run_id}/events", params=params)
        assert response.status_code == 400 and response.json()["detail"].startswith(CURSOR_400)
    for limit in ("²", HUGE, "0", "1001", "1.5"):
        response = httpx.get(f"{gateway}/v1/runs", params={"limit": limit})
        assert response.status_code == 400, limit
        assert response.json()["detail"].startswith("limit must be an integer from 1 to 1000")
        assert "invalid literal" not in response.text and "Exceeds" not in response.text
    # The biggest cursor there is: valid, nothing after it (the stream waits; not read here).
    assert len(envelopes(read_stream(gateway, run_id, params={"after": "3"}))) > 0


def rpc(base: str, method: str, params: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(f"{base}/rpc", json=body).json()  # type: ignore[no-any-return]


def test_jsonrpc_cursors_and_page_sizes(gateway: str) -> None:
    run_id = finished_run(gateway)
    for params, param in (
        ({"runId": run_id, "after": 10**30}, "after"),
        ({"runId": run_id, "after": "²"}, "after"),
        ({"runId": run_id, "after": -1}, "after"),
        ({"runId": run_id, "limit": 10**30}, "limit"),
        ({"runId": run_id, "limit": 1.5}, "limit"),
    ):
        error = rpc(gateway, "run.events", params)["error"]
        assert (error["code"], error["data"]["param"]) == (-32602, param), params
    # 4,300 digits still decode (an int, refused by the bound); past that, msgspec refuses
    # the number, and with it the message: a parse error.
    for digits, code in ((HUGE, -32602), ("9" * 5000, -32700)):
        body = '{"jsonrpc": "2.0", "id": 1, "method": "run.events", "params": {"runId": "x", '
        body += f'"after": {digits}}}}}'
        reply = httpx.post(
            f"{gateway}/rpc", content=body, headers={"content-type": "application/json"}
        ).json()
        assert reply["error"]["code"] == code
        assert "Exceeds" not in json.dumps(reply) and len(json.dumps(reply)) < 1000
    page = rpc(gateway, "run.events", {"runId": run_id, "after": MAX_INT})["result"]
    assert page == {"events": [], "cursor": MAX_INT, "done": True}


def test_agui_attach_cursor(gateway: str) -> None:
    run_id = finished_run(gateway)
    for after in (10**30, -1, "3", 1.5):
        body = {
            "threadId": run_id,
            "runId": run_id,
            "messages": [],
            "forwardedProps": {"loopgate": {"attach": True, "after": after}},
        }
        response = httpx.post(f"{gateway}/agui", json=body)
        assert response.status_code == 422, (after, response.text)
        assert response.json()["detail"] == (
            f"forwardedProps.loopgate.after must be an integer from 0 to {MAX_INT}"
        )
