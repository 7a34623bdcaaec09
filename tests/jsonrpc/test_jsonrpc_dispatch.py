"""The dispatcher against a real hub, in process: spec rules, params, errors, limits, methods."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from loopgate.adapters.jsonrpc.dispatch import Dispatcher
from loopgate.adapters.jsonrpc.limits import RpcLimits
from loopgate.adapters.jsonrpc.methods import Trace
from loopgate.contracts.contract import contract_dict
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings
from tests.jsonrpc.jsonrpc_support import spec_dispatcher
from tests.waiting import until

pytestmark = pytest.mark.anyio
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    # No run queue: past the limit a start is refused (-32002), the refusal tested here.
    settings = Settings(scripted_delay_s=0.0, max_active_runs=4, max_queued_runs=0)
    async with build_hub(settings) as hub:
        yield hub


async def ask(dispatcher: Dispatcher, message: Any, **kwargs: Any) -> Any:
    raw = message if isinstance(message, str | bytes) else json.dumps(message)
    reply = await dispatcher.handle(raw, **kwargs)
    return None if reply is None else json.loads(reply)


def req(method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        message["params"] = params
    return message


def error(reply: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    assert "result" not in reply, reply
    return reply["error"]["code"], reply["error"].get("data", {})


async def finished_run(hub: Hub, prompt: str = "plain") -> str:
    d = Dispatcher(hub, RpcLimits())
    run_id = (await ask(d, req("run.start", {"input": prompt})))["result"]["runId"]
    with anyio.fail_after(10):
        await until(lambda: hub.get(run_id), lambda run: run.state == "finished")
    return run_id


# --- the spec's rules -------------------------------------------------------------------


@pytest.mark.parametrize("rid", ["abc", "", 0, -7, 2**70, 1.5, None, "loopgate:1"], ids=repr)
async def test_id_type_and_value_are_preserved(rid: Any) -> None:
    reply = await ask(spec_dispatcher(), req("subtract", [3, 1], rid))
    assert reply == {"jsonrpc": "2.0", "result": 2, "id": rid}
    assert type(reply["id"]) is type(rid)


@pytest.mark.parametrize("rid", [True, [1], {"a": 1}], ids=repr)
async def test_ids_of_other_types_are_invalid(rid: Any) -> None:
    reply = await ask(spec_dispatcher(), req("subtract", [3, 1], rid))
    assert reply["id"] is None
    assert error(reply)[0] == -32600
    assert "id" in error(reply)[1]["detail"]


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ({"method": "sum", "id": 1}, "jsonrpc"),
        ({"jsonrpc": "1.0", "method": "sum", "id": 1}, "jsonrpc"),
        ({"jsonrpc": 2.0, "method": "sum", "id": 1}, "jsonrpc"),
        ({"jsonrpc": "2.0", "method": None, "id": 1}, "method"),
        ({"jsonrpc": "2.0", "id": 1}, "method"),
        ({"jsonrpc": "2.0", "method": "sum", "params": 3, "id": 1}, "params"),
        ({"jsonrpc": "2.0", "method": "sum", "params": "x", "id": 1}, "params"),
        ({"jsonrpc": "2.0", "method": "sum", "params": None, "id": 1}, "params"),
    ],
)
async def test_invalid_request_objects_keep_a_readable_id(message: Any, says: str) -> None:
    reply = await ask(spec_dispatcher(), message)
    code, data = error(reply)
    assert code == -32600 and says in data["detail"]
    assert reply["id"] == 1


async def test_each_batch_item_is_judged_on_its_own() -> None:
    # jsonrpcserver 5.0.9 answers these with ONE error for the whole batch.
    replies = await ask(spec_dispatcher(), [req("sum", [1, 2], "a"), {"foo": 1}])
    assert replies[0] == {"jsonrpc": "2.0", "result": 3, "id": "a"}
    assert error(replies[1])[0] == -32600
    replies = await ask(spec_dispatcher(), [1, 2])
    assert [error(r)[0] for r in replies] == [-32600, -32600]


async def test_notifications_are_never_answered_even_when_they_fail() -> None:
    d = spec_dispatcher()
    for params in ([1, 2], {"nope": 1}, [1, 2, 3]):
        assert await ask(d, {"jsonrpc": "2.0", "method": "subtract", "params": params}) is None
    assert await ask(d, {"jsonrpc": "2.0", "method": "test.explode"}) is None
    assert await ask(d, {"jsonrpc": "2.0", "method": "no.such"}) is None
    # ... while an invalid object is answered (it is not a notification: it is not a request).
    assert error(await ask(d, {"jsonrpc": "2.0", "method": 5}))[0] == -32600


async def test_unexpected_exceptions_leak_nothing() -> None:
    reply = await ask(spec_dispatcher(), req("test.explode"))
    assert error(reply)[0] == -32603
    assert reply["error"]["message"] == "Internal error"
    assert "secret" not in json.dumps(reply) and "RuntimeError" not in json.dumps(reply)


async def test_a_response_object_is_invalid_where_the_server_asks_nothing() -> None:
    reply = await ask(spec_dispatcher(), {"jsonrpc": "2.0", "result": 1, "id": 9})
    assert error(reply)[0] == -32600 and reply["id"] == 9


@pytest.mark.parametrize(
    "raw", [b"", b"   ", b"{", b"\xff\xfe", b'"\xed\xa0\x80"', b"[" * 50_000, b"1 2", b"nul"]
)
async def test_parse_errors(raw: bytes) -> None:
    reply = await ask(spec_dispatcher(), raw)
    assert reply["id"] is None and error(reply)[0] == -32700


async def test_size_limits() -> None:
    d = spec_dispatcher(max_message_bytes=300, max_batch=3)
    reply = await ask(d, req("sum", list(range(100))))
    code, data = error(reply)
    assert code == -32006 and "the limit is 300" in data["detail"]
    reply = await ask(d, [req("sum", [1], i) for i in range(4)])
    assert isinstance(reply, dict) and error(reply)[0] == -32006
    assert "batch has 4 items; the limit is 3" in reply["error"]["data"]["detail"]
    assert len(await ask(d, [req("sum", [1], i) for i in range(3)])) == 3


# --- params -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "param"),
    [
        ("run.get", {}, "runId"),
        ("run.get", {"runId": 5}, "runId"),
        ("run.get", [5], "runId"),
        ("run.list", {"limit": 0}, "limit"),
        ("run.list", [5000], "limit"),
        ("run.list", {"limit": "10"}, "limit"),
        ("run.events", {"runId": "r", "after": -1}, "after"),
        ("run.start", {"input": [{"role": "robot"}]}, "input"),
        ("run.start", {"approval": "maybe"}, "approval"),
        ("run.start", {"runId": "has space"}, "runId"),
        ("run.start", {"input": "x", "replay": "plain-answer", "source": "loop"}, "replay"),
        ("run.respond", {"runId": "r", "requestId": "p", "decision": "yes"}, "decision"),
        ("run.steer", {"runId": "r", "content": ""}, "content"),
        ("run.get", {"runId": "r", "_meta": "x"}, "_meta"),
        ("subtract", [1], "subtrahend"),
        ("subtract", {"minuend": 1, "subtrahend": "2"}, "subtrahend"),
    ],
)
async def test_invalid_params_name_the_parameter(
    hub: Hub, method: str, params: Any, param: str
) -> None:
    d = Dispatcher(hub, RpcLimits(), spec_dispatcher().methods)
    code, data = error(await ask(d, req(method, params)))
    assert code == -32602, data
    assert data["param"] == param, data
    assert param in data["detail"] or param == "_meta", data


async def test_too_many_positional_params(hub: Hub) -> None:
    code, data = error(await ask(Dispatcher(hub, RpcLimits()), req("run.get", ["a", "b"])))
    assert code == -32602
    assert data["detail"] == "run.get takes at most 1 (runId) positional params; got 2"


async def test_positional_and_named_params_are_equivalent(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    run_id = await finished_run(hub)
    named = await ask(d, req("run.events", {"runId": run_id, "after": 2, "limit": 3}))
    positional = await ask(d, req("run.events", [run_id, 2, 3]))
    assert named == positional
    assert [e["seq"] for e in named["result"]["events"]] == [3, 4, 5]


# --- methods against the hub ------------------------------------------------------------


async def test_start_get_list_events(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    run_id = await finished_run(hub)
    run = (await ask(d, req("run.get", {"runId": run_id})))["result"]
    assert run["id"] == run_id and run["state"] == "finished" and run["status"] == "completed"
    assert run["input"] == [{"role": "user", "content": "plain"}]
    assert set(run) == {
        "id", "threadId", "source", "state", "status", "createdAt", "lastSeq",
        "subscribers", "metadata", "input", "owner", "agent",
    }  # fmt: skip
    assert run["agent"] == "default"
    listed = (await ask(d, req("run.list", {"limit": 10})))["result"]["runs"]
    assert [r["id"] for r in listed] == [run_id]
    seqs: list[int] = []
    after, done = 0, False
    while not done:
        page = (await ask(d, req("run.events", {"runId": run_id, "after": after, "limit": 4})))[
            "result"
        ]
        seqs += [e["seq"] for e in page["events"]]
        after, done = page["cursor"], page["done"]
    assert seqs == list(range(1, run["lastSeq"] + 1))
    assert set(page["events"][-1]) == {"run_id", "seq", "ts", "kind", "data"}


async def test_server_error_codes(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    code, data = error(await ask(d, req("run.get", ["nope"])))
    assert (code, data["runId"]) == (-32000, "nope")
    run_id = await finished_run(hub)
    code, data = error(await ask(d, req("run.steer", [run_id, "more"])))
    assert (code, data["status"]) == (-32001, "completed")
    code, _ = error(await ask(d, req("run.respond", [run_id, "perm_1", "allow_once"])))
    assert code == -32001
    cancelled = (await ask(d, req("run.cancel", [run_id])))["result"]
    assert cancelled["accepted"] is False and cancelled["runId"] == run_id
    code, data = error(await ask(d, req("run.start", {"input": "x", "runId": run_id})))
    assert (code, data["runId"]) == (-32003, run_id)
    code, data = error(await ask(d, req("run.start", {"input": "x", "config": {"max_rounds": 0}})))
    assert code == -32602 and "max_rounds" in data["detail"]
    code, data = error(await ask(d, req("run.start", {"input": ""})))
    assert code == -32602 and "input" in data["detail"]


async def test_live_run_refusals_and_limits(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    started = [await ask(d, req("run.start", {"input": "forever"})) for _ in range(4)]
    ids = [s["result"]["runId"] for s in started]
    code, data = error(await ask(d, req("run.start", {"input": "forever"})))
    assert code == -32002 and data["retryAfter"] >= 1 and "active runs" in data["detail"]
    code, data = error(await ask(d, req("run.respond", [ids[0], "perm_9", "allow_once"])))
    assert code == -32007 and "perm_9" in data["detail"]
    steered = (await ask(d, req("run.steer", [ids[0], "hurry up"])))["result"]
    assert steered["accepted"] is True
    for run_id in ids:
        assert (await ask(d, req("run.cancel", [run_id])))["result"]["accepted"] is True


async def test_streaming_methods_need_a_streaming_transport(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    for method, params in [
        ("run.subscribe", {"runId": "x"}),
        ("run.unsubscribe", {"subscription": "sub_1"}),
        ("run.start", {"input": "plain", "subscribe": True}),
    ]:
        code, data = error(await ask(d, req(method, params)))
        assert code == -32004 and "run.events" in data["detail"]
    assert await hub.list_runs() == []  # the refused subscribe:true started nothing


async def test_trace_context_from_meta_or_transport(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    other = "00-11111111111111111111111111111111-2222222222222222-01"
    header = Trace(other, "from=header")
    cases = [
        ({"_meta": {"traceparent": TRACEPARENT}}, Trace(), (TRACEPARENT, None)),
        (
            {"_meta": {"traceparent": TRACEPARENT, "tracestate": "a=1"}},
            Trace(),
            (TRACEPARENT, "a=1"),
        ),
        # The call's own context wins whole: the transport's tracestate is not mixed in.
        ({"_meta": {"traceparent": TRACEPARENT}}, header, (TRACEPARENT, None)),
        ({}, header, (other, "from=header")),
        ({"_meta": {"traceparent": "garbage", "tracestate": "a=1"}}, Trace(), (None, None)),
        ({"_meta": {"traceparent": TRACEPARENT, "tracestate": 7}}, Trace(), (TRACEPARENT, None)),
        ({"_meta": {}}, Trace(), (None, None)),
    ]
    for extra, transport, expected in cases:
        params = {"source": "ingest", **extra}
        reply = await ask(d, req("run.start", params), trace=transport or Trace())
        assert "result" in reply, reply
        info = await hub.get(reply["result"]["runId"])
        await hub.end_ingest(info.id)
        got = (info.metadata.get("traceparent"), info.metadata.get("tracestate"))
        assert got == expected, (extra, transport)


async def test_discover_and_contract(hub: Hub) -> None:
    d = Dispatcher(hub, RpcLimits())
    doc = (await ask(d, req("rpc.discover")))["result"]
    assert doc["openrpc"] == "1.2.6"
    names = [m["name"] for m in doc["methods"]]
    assert names == [
        "run.start", "run.get", "run.list", "run.events", "run.cancel", "run.steer",
        "run.respond", "run.subscribe", "run.unsubscribe", "agent.list", "contract.get",
        "rpc.discover",
    ]  # fmt: skip
    events = next(m for m in doc["methods"] if m["name"] == "run.events")
    assert [(p["name"], p["required"]) for p in events["params"]] == [
        ("runId", True),
        ("after", False),
        ("limit", False),
    ]
    assert {e["code"] for e in events["errors"]} == {-32602, -32000}
    assert (await ask(d, req("contract.get")))["result"] == contract_dict()
