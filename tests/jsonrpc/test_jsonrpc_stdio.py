"""``loopgate rpc`` driven as a subprocess over stdin/stdout, one JSON message per line."""

from __future__ import annotations

import json
import time

from tests.jsonrpc.jsonrpc_support import RpcProcess

ARGS = ("--scripted-delay", "0.002", "--max-body-bytes", "4096")


def test_a_run_with_a_subscription_then_a_clean_exit() -> None:
    with RpcProcess(*ARGS) as rpc:
        reply, _ = rpc.call("run.start", {"input": "plain", "subscribe": True})
        sub = reply["result"]["subscription"]
        events = []
        while True:
            message = rpc.recv()
            assert message["params"]["subscription"] == sub
            if message["method"] == "run.end":
                break
            events.append(message["params"]["event"])
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert message["params"]["status"] == "completed"
        assert message["params"]["lastSeq"] == len(events)
        assert rpc.finish() == 0
        assert rpc.lines.get(timeout=1) == b""  # nothing else on stdout: protocol only


def test_bad_lines_are_answered_and_the_process_keeps_serving() -> None:
    with RpcProcess(*ARGS) as rpc:
        rpc.send(b"this is not json")
        assert rpc.recv()["error"]["code"] == -32700
        rpc.send(b"   ")  # blank lines are skipped, not answered
        rpc.send(b"[1,2]")
        assert [r["error"]["code"] for r in rpc.recv()] == [-32600, -32600]
        rpc.send(b'{"jsonrpc":"2.0","method":"run.get","params":["' + b"x" * 10_000 + b'"],"id":1}')
        reply = rpc.recv()
        assert reply["error"]["code"] == -32006 and "4096" in reply["error"]["data"]["detail"]
        rpc.send(b'\xff\xfe{"jsonrpc"')
        assert rpc.recv()["error"]["code"] == -32700
        reply, before = rpc.call("run.list")
        assert reply["result"] == {"runs": []} and before == []
        assert rpc.finish() == 0


def test_permission_request_over_stdio() -> None:
    with RpcProcess(*ARGS) as rpc:
        rpc.call(
            "run.start", {"input": "what time is it?", "approval": "always", "subscribe": True}
        )
        asked = None
        while True:
            message = rpc.recv()
            if message.get("method") == "run.permission":
                asked = message
                rpc.send({"jsonrpc": "2.0", "id": message["id"],
                          "result": {"decision": "allow_always"}})  # fmt: skip
            elif message.get("method") == "run.end":
                break
            elif message["params"]["event"]["kind"] == "permission_result":
                result = message["params"]["event"]["data"]
        assert asked is not None and asked["id"].startswith("loopgate:")
        assert (result["decision"], result["by"]) == ("allow_always", "client")
        assert rpc.finish() == 0


def test_eof_mid_run_ends_the_process_promptly() -> None:
    with RpcProcess(*ARGS) as rpc:
        reply, _ = rpc.call("run.start", {"input": "forever", "subscribe": True})
        assert "subscription" in reply["result"]
        json.loads(rpc.recv_line())  # the stream is flowing
        started = time.monotonic()
        assert rpc.finish() == 0
        assert time.monotonic() - started < 8
        assert b"Traceback" not in rpc.stderr


def test_every_answer_is_one_line() -> None:
    # contract.get once returned the pretty-printed contract file, newlines and all.
    with RpcProcess(*ARGS) as rpc:
        for method in ("contract.get", "rpc.discover", "run.list"):
            rpc.send({"jsonrpc": "2.0", "id": method, "method": method})
            assert json.loads(rpc.recv_line())["id"] == method
        assert rpc.finish() == 0
