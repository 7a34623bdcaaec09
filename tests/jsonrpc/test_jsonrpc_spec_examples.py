"""Every example of the JSON-RPC 2.0 specification ("Examples" section), replayed against a real
``POST /rpc`` on uvicorn and answered as the spec shows.

The example methods (subtract, sum, notify_hello, …) live in a test-only registry
(tests/jsonrpc/jsonrpc_support.py); ``foobar`` and ``foo.get`` are absent on purpose. Our error
objects add a ``data`` member (the spec allows it: "may be omitted"); it is checked for shape
and then removed before the exact comparison. Batch responses come in request order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from jsonrpcclient import Error, Ok, notification, parse, request

from loopgate.adapters.jsonrpc.methods import METHODS
from tests.jsonrpc.jsonrpc_support import spec_server

# (name, exact request bytes as the spec prints them, expected response or None)
EXAMPLES: list[tuple[str, str, Any]] = [
    (
        "positional 1",
        '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
        {"jsonrpc": "2.0", "result": 19, "id": 1},
    ),
    (
        "positional 2",
        '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
        {"jsonrpc": "2.0", "result": -19, "id": 2},
    ),
    (
        "named 1",
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, '
        '"id": 3}',
        {"jsonrpc": "2.0", "result": 19, "id": 3},
    ),
    (
        "named 2",
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, '
        '"id": 4}',
        {"jsonrpc": "2.0", "result": 19, "id": 4},
    ),
    (
        "notification",
        '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
        None,
    ),
    ("notification of a missing method", '{"jsonrpc": "2.0", "method": "foobar"}', None),
    (
        "non-existent method",
        '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
        {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"},
    ),
    (
        "invalid JSON",
        '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
        {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None},
    ),
    (
        "invalid request object",
        '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None},
    ),
    (
        "batch, invalid JSON",
        '[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n'
        '  {"jsonrpc": "2.0", "method"\n]',
        {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None},
    ),
    (
        "empty array",
        "[]",
        {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None},
    ),
    (
        "invalid batch, not empty",
        "[1]",
        [{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}],
    ),
    (
        "invalid batch",
        "[1,2,3]",
        [{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}]
        * 3,
    ),
    (
        "batch",
        """[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]""",
        [
            {"jsonrpc": "2.0", "result": 7, "id": "1"},
            {"jsonrpc": "2.0", "result": 19, "id": "2"},
            {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None},
            {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
            {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"},
        ],
    ),
    (
        "batch of notifications",
        """[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]""",
        None,
    ),
]


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with spec_server() as base, httpx.Client(base_url=base, timeout=10) as c:
        yield c


def post(client: httpx.Client, body: str | bytes) -> httpx.Response:
    return client.post("/rpc", content=body, headers={"content-type": "application/json"})


def without_data(response: Any) -> Any:
    """Check each error's ``data`` ({"detail": str, …}) and drop it for the exact comparison."""
    if isinstance(response, list):
        return [without_data(r) for r in response]
    error = response.get("error")
    if isinstance(error, dict) and "data" in error:
        assert isinstance(error["data"]["detail"], str) and error["data"]["detail"]
        response = {**response, "error": {k: v for k, v in error.items() if k != "data"}}
    return response


@pytest.mark.parametrize(("name", "body", "expected"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_spec_example(client: httpx.Client, name: str, body: str, expected: Any) -> None:
    response = post(client, body)
    if expected is None:
        assert response.status_code == 204, response.text
        assert response.content == b""
        return
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert without_data(response.json()) == expected


def test_the_example_methods_are_not_in_the_product(client: httpx.Client) -> None:
    assert not {"subtract", "sum", "update", "notify_hello", "get_data"} & set(METHODS)


def test_requests_built_by_jsonrpcclient(client: httpx.Client) -> None:
    positional = request("subtract", params=(42, 23))
    named = request("subtract", params={"minuend": 42, "subtrahend": 23}, id="named")
    missing = request("foobar", id=7)
    batch = [positional, notification("notify_hello", params=(7,)), named, missing]
    responses = list(parse(post(client, json.dumps(batch)).json()))
    assert responses[0] == Ok(19, positional["id"])
    assert responses[1] == Ok(19, "named")
    assert isinstance(responses[2], Error)
    assert (responses[2].code, responses[2].message, responses[2].id) == (
        -32601,
        "Method not found",
        7,
    )
    assert "foobar" in responses[2].data["detail"]
    assert post(client, json.dumps(notification("update", params=(1, 2)))).status_code == 204
