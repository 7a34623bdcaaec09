"""examples/plain_http_loop.py and examples/plain_stdio_loop.py as real processes speaking the
HTTP (NDJSON) and stdio (JSON-RPC) loop protocols: runs, cancel, steer, concurrent runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from loopgate.contracts import LoopEvent
from tests.examples.support import EXAMPLES, HttpLoop, request
from tests.integrations.fake_context import as_event, check_stream, kinds, of_kind, text

pytestmark = pytest.mark.timeout(30)

# 40 more words to stream at 50 ms each: the run is still answering when a command arrives.
LONG = " ".join(f"w{i}" for i in range(40))


def test_http_run(http_loop: HttpLoop) -> None:
    events = http_loop.run("r1", "one two three")
    assert kinds(events) == [
        "stage_start",
        "reasoning_delta",
        "tool_call_start",
        "tool_call_result",
        "completion",
        "stage_start",
        *["content_delta"] * 7,
        "completion",
    ]
    assert of_kind(events, "tool_call_result")[0]["resultPreview"] == "3"
    assert text(events) == "You wrote 3 words: one two three"
    assert events[-1].data == {"status": "completed", "reason": "stop", "round": 2}


def test_http_cancel_command(http_loop: HttpLoop) -> None:
    cancelled: list[bool] = []

    def cancel_at_the_first_word(event: LoopEvent) -> None:
        if event.kind == "content_delta" and not cancelled:
            assert http_loop.command({"type": "cancel", "run_id": "r2"}) == 204
            cancelled.append(True)

    events = http_loop.run("r2", LONG, cancel_at_the_first_word)
    assert events[-1].data["status"] == "cancelled"
    assert 1 <= len(of_kind(events, "content_delta")) < 10
    assert http_loop.command({"type": "cancel", "run_id": "r2"}) == 404  # the run is over


def test_http_cancel_by_closing_the_connection(http_loop: HttpLoop) -> None:
    headers = {"content-type": "application/json", "accept": "application/x-ndjson"}
    body = request("r3", LONG)
    with http_loop.client.stream("POST", http_loop.url, content=body, headers=headers) as response:
        for line in response.iter_lines():
            if as_event(json.loads(line)).kind == "content_delta":
                break
    http_loop.wait_for_log("run r3: connection closed, run stopped")
    assert http_loop.command({"type": "steer", "run_id": "r3", "content": "hello?"}) == 404


def test_http_steer(http_loop: HttpLoop) -> None:
    steered: list[bool] = []

    def steer_at_the_first_word(event: LoopEvent) -> None:
        if event.kind == "content_delta" and not steered:
            steer = {"type": "steer", "run_id": "r4", "content": "keep it short"}
            assert http_loop.command(steer) == 204
            steered.append(True)

    events = http_loop.run("r4", LONG, steer_at_the_first_word)
    assert of_kind(events, "steer") == [{"content": "keep it short", "round": 2}]
    assert text(events).endswith("— all right: keep it short")
    assert events[-1].data["status"] == "completed"


def test_http_commands_it_cannot_take(http_loop: HttpLoop) -> None:
    assert http_loop.command({"type": "cancel", "run_id": "no-such-run"}) == 404
    respond = {"type": "respond", "run_id": "x", "request_id": "p1", "decision": "allow_once"}
    assert http_loop.command(respond) == 404


# --- stdio ---------------------------------------------------------------------------------------


class StdioLoop:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.stdout = proc.stdout

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.stdin.flush()

    def start(self, request_id: int, run_id: str, input: str) -> None:
        params = msgspec.json.decode(request(run_id, input))
        self.send({"id": request_id, "method": "run.start", "params": params})

    def receive(self) -> dict[str, Any]:
        line = self.stdout.readline()
        assert line, "the loop process closed its stdout"
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        return message  # type: ignore[no-any-return]


@pytest.fixture
def stdio_loop() -> Iterator[StdioLoop]:
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "plain_stdio_loop.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield StdioLoop(proc)
    finally:
        proc.kill()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            assert pipe is not None
            pipe.close()


def run_all(
    loop: StdioLoop,
    run_ids: set[str],
    on_event: Callable[[str, LoopEvent], None] = lambda run_id, event: None,
) -> tuple[dict[int, Any], dict[str, list[LoopEvent]], list[str]]:
    """Read until every run in ``run_ids`` ended: the answers by request id, the events by run,
    and the order in which runs sent their events."""
    answers: dict[int, Any] = {}
    events: dict[str, list[LoopEvent]] = {run_id: [] for run_id in run_ids}
    order: list[str] = []
    open_runs = set(run_ids)
    while open_runs:
        message = loop.receive()
        if "id" in message:
            answers[message["id"]] = message.get("result", message.get("error"))
            continue
        assert message["method"] == "run.event"
        params = message["params"]
        event = as_event({"kind": params["kind"], "data": params["data"]})
        events[params["run_id"]].append(event)
        order.append(params["run_id"])
        on_event(params["run_id"], event)
        if event.kind == "completion" and event.data["status"] != "executing":
            open_runs.discard(params["run_id"])
    for stream in events.values():
        check_stream(stream)
    return answers, events, order


def test_stdio_concurrent_runs_and_cancel(stdio_loop: StdioLoop) -> None:
    stdio_loop.start(1, "long", LONG)
    stdio_loop.start(2, "short", "hello there")
    cancelled: list[bool] = []

    def cancel_long_at_its_first_word(run_id: str, event: LoopEvent) -> None:
        if run_id == "long" and event.kind == "content_delta" and not cancelled:
            stdio_loop.send({"method": "run.cancel", "params": {"run_id": "long"}})
            cancelled.append(True)

    answers, events, order = run_all(stdio_loop, {"long", "short"}, cancel_long_at_its_first_word)
    assert answers == {1: None, 2: None}
    assert events["long"][-1].data["status"] == "cancelled"
    assert len(of_kind(events["long"], "content_delta")) < 10
    assert text(events["short"]) == "You wrote 2 words: hello there"
    assert events["short"][-1].data["status"] == "completed"
    # Both streamed at once: the short run began before the long one ended.
    assert order.index("short") < len(order) - 1 - order[::-1].index("long")


def test_stdio_steer_and_unknown_methods(stdio_loop: StdioLoop) -> None:
    stdio_loop.send({"id": 7, "method": "run.pause", "params": {}})
    stdio_loop.start(8, "r1", LONG)
    steered: list[bool] = []

    def steer_at_the_first_word(run_id: str, event: LoopEvent) -> None:
        if event.kind == "content_delta" and not steered:
            params = {"run_id": "r1", "content": "keep it short"}
            stdio_loop.send({"method": "run.steer", "params": params})
            steered.append(True)

    answers, events, _ = run_all(stdio_loop, {"r1"}, steer_at_the_first_word)
    assert answers == {7: {"code": -32601, "message": "Method not found: run.pause"}, 8: None}
    assert of_kind(events["r1"], "steer") == [{"content": "keep it short", "round": 2}]
    assert text(events["r1"]).endswith("— all right: keep it short")
    assert events["r1"][-1].data["status"] == "completed"
