"""Property-based: arbitrary JSON values and byte strings at POST /rpc, the WebSocket and stdio.

Never a 5xx, never a dropped connection, and always spec-shaped answers: one per non-notification
item, in order, with the request's id when it had a valid one. The oracle below is written from
the spec, independently of adapters/jsonrpc/protocol.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection, connect

from tests.jsonrpc.jsonrpc_support import RpcProcess
from tests.strategies import json_values, scalars

pytestmark = pytest.mark.gateway(max_active_runs=8)

CODES = {-32700, -32600, -32601, -32602, -32603} | set(range(-32099, -31999))
METHOD_NAMES = [
    "run.start", "run.get", "run.list", "run.events", "run.cancel", "run.steer", "run.respond",
    "run.subscribe", "run.unsubscribe", "contract.get", "rpc.discover", "rpc.other", "",
]  # fmt: skip
PROPERTY_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ids = scalars | st.lists(scalars, max_size=2)
requestish = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]),
        "method": st.sampled_from(METHOD_NAMES) | st.text(max_size=10) | scalars,
        "params": json_values,
        "id": ids,
        "result": json_values,
        "error": json_values,
    },
)
OMIT = object()


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-formed requests and notifications, with one part sometimes wrong."""
    message: dict[str, Any] = {}
    version = draw(st.sampled_from(["2.0"] * 6 + ["1.0", 2, OMIT]))
    if version is not OMIT:
        message["jsonrpc"] = version
    message["method"] = draw(
        st.sampled_from(METHOD_NAMES) | st.text(max_size=10) | scalars
        if draw(st.integers(0, 9)) == 0
        else st.sampled_from(METHOD_NAMES)
    )
    params = draw(
        st.sampled_from([OMIT, OMIT])
        | st.lists(scalars, max_size=3)
        | st.dictionaries(
            st.sampled_from(["runId", "limit", "after", "subscription", "x", "_meta"]),
            scalars | json_values,
            max_size=3,
        )
        | scalars
    )
    if params is not OMIT:
        message["params"] = params
    rid = draw(st.sampled_from([OMIT, OMIT]) | ids)
    if rid is not OMIT:
        message["id"] = rid
    return message


items = requests() | requests() | requestish | json_values
messages = items | st.lists(items, max_size=6)
raw_bytes = st.binary(max_size=200) | messages.map(lambda v: json.dumps(v).encode()[:-1])


def valid_id(value: Any) -> bool:
    return value is None or type(value) in (str, int, float)


def is_notification(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("jsonrpc") == "2.0"
        and isinstance(item.get("method"), str)
        and "id" not in item
        and ("params" not in item or isinstance(item["params"], list | dict))
    )


def is_reply(item: Any) -> bool:
    """A response object a client sends back (streaming transports route it, never answer it)."""
    return (
        isinstance(item, dict)
        and item.get("jsonrpc") == "2.0"
        and "method" not in item
        and "id" in item
        and valid_id(item["id"])
        and ("result" in item) != ("error" in item)
    )


def expected_ids(item: Any, streaming: bool) -> list[Any]:
    """The answers an item gets: [] or [its id] (``...`` = any id: not checked)."""
    if is_notification(item) or (streaming and is_reply(item)):
        return []
    if isinstance(item, dict) and "id" in item and valid_id(item["id"]):
        return [item["id"]]
    return [...]


def check_response(response: Any, expected_id: Any) -> None:
    assert isinstance(response, dict), response
    assert response["jsonrpc"] == "2.0"
    assert ("result" in response) != ("error" in response), response
    assert set(response) <= {"jsonrpc", "result", "error", "id"}
    assert valid_id(response["id"])
    if expected_id is not ...:
        # ids survive exactly (JSON 1.0 and 1 are the same number; so are -0 and 0).
        assert response["id"] == expected_id and type(response["id"]) is type(expected_id), (
            response["id"],
            expected_id,
        )
    if "error" in response:
        error = response["error"]
        assert isinstance(error["code"], int) and error["code"] in CODES, error
        assert isinstance(error["message"], str) and error["message"]
        assert isinstance(error["data"]["detail"], str)
        assert "Traceback" not in error["data"]["detail"]


def check_answer(sent: Any, answer: Any, streaming: bool) -> None:
    """``sent``: the decoded message (or ``...`` when it was not JSON); ``answer``: the decoded
    reply (None = nothing was sent back)."""
    if sent is ... or (isinstance(sent, list) and not sent):
        assert isinstance(answer, dict) and answer["id"] is None
        check_response(answer, None)
        assert answer["error"]["code"] in (-32700, -32600)
        return
    if isinstance(sent, list):
        expected = [i for item in sent for i in expected_ids(item, streaming)]
        if not expected:
            assert answer is None
            return
        assert isinstance(answer, list) and len(answer) == len(expected), (sent, answer)
        for response, rid in zip(answer, expected, strict=True):
            check_response(response, rid)
        return
    expected = expected_ids(sent, streaming)
    if not expected:
        assert answer is None, answer
        return
    check_response(answer, expected[0])


def decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return ...


# --- the gateway ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(gateway: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def socket(gateway: str) -> Iterator[ClientConnection]:
    with connect(gateway.replace("http://", "ws://") + "/rpc/ws") as ws:
        yield ws


@pytest.fixture(scope="module")
def stdio() -> Iterator[RpcProcess]:
    with RpcProcess("--scripted-delay", "0", "--max-active-runs", "8") as rpc:
        yield rpc


def post(http: httpx.Client, raw: bytes) -> Any:
    response = http.post("/rpc", content=raw, headers={"content-type": "application/json"})
    assert response.status_code in (200, 204), (response.status_code, response.text)
    if response.status_code == 204:
        assert response.content == b""
        return None
    return response.json()


@PROPERTY_SETTINGS
@given(message=messages)
def test_http_json_values(http: httpx.Client, message: Any) -> None:
    check_answer(message, post(http, json.dumps(message).encode()), streaming=False)


@PROPERTY_SETTINGS
@given(raw=raw_bytes)
def test_http_bytes(http: httpx.Client, raw: bytes) -> None:
    check_answer(decoded(raw), post(http, raw), streaming=False)


class Sentinel:
    """Sends ``raw`` then a sentinel request; what arrives before the sentinel's answer (minus
    server-initiated messages) is ``raw``'s answer. Proves the connection is still serving."""

    def __init__(self) -> None:
        self.count = 0

    def exchange(self, send: Any, recv: Any, raw: bytes | str) -> Any:
        self.count += 1
        sentinel = f"sentinel-{self.count}"
        send(raw)
        send(json.dumps({"jsonrpc": "2.0", "method": "run.list", "params": [1], "id": sentinel}))
        answers = []
        while True:
            message = json.loads(recv())
            if isinstance(message, dict) and "method" in message:
                continue  # a notification or a run.permission request of a started run
            if isinstance(message, dict) and message.get("id") == sentinel:
                assert "result" in message, message
                break
            answers.append(message)
        assert len(answers) <= 1, answers
        return answers[0] if answers else None


ws_sentinel = Sentinel()


@PROPERTY_SETTINGS
@given(message=messages)
def test_websocket_json_values(socket: ClientConnection, message: Any) -> None:
    answer = ws_sentinel.exchange(socket.send, lambda: socket.recv(timeout=10), json.dumps(message))
    check_answer(message, answer, streaming=True)


@PROPERTY_SETTINGS
@given(raw=raw_bytes)
def test_websocket_bytes(socket: ClientConnection, raw: bytes) -> None:
    answer = ws_sentinel.exchange(socket.send, lambda: socket.recv(timeout=10), raw)
    check_answer(decoded(raw), answer, streaming=True)


stdio_sentinel = Sentinel()


def stdio_exchange(rpc: RpcProcess, raw: bytes) -> Any:
    def send(data: bytes | str) -> None:
        rpc.send(data if isinstance(data, bytes) else data.encode())

    return stdio_sentinel.exchange(send, rpc.recv_line, raw)


@PROPERTY_SETTINGS
@given(message=messages)
def test_stdio_json_values(stdio: RpcProcess, message: Any) -> None:
    check_answer(message, stdio_exchange(stdio, json.dumps(message).encode()), streaming=True)


@PROPERTY_SETTINGS
@given(raw=raw_bytes.map(lambda b: b.replace(b"\n", b" ").replace(b"\r", b" ")))
def test_stdio_bytes(stdio: RpcProcess, raw: bytes) -> None:
    if not raw.strip():
        return  # blank lines are skipped by design (nothing to answer)
    check_answer(decoded(raw), stdio_exchange(stdio, raw), streaming=True)
