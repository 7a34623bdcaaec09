"""A toy agent loop as a stdio child, in plain Python: the standard library only, nothing from
loopgate.

    loopgate serve --loop-cmd "python examples/plain_stdio_loop.py"

One process serves every run. loopgate writes JSON-RPC 2.0 to its stdin, one message per line: the
request run.start (params: the run's request), the notifications run.cancel and run.steer. The
child answers run.start, then sends the run's events as run.event notifications on stdout. Each
run streams in a thread of its own; logs would go to stderr.
"""

import json
import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

WORD_DELAY_S = 0.05


class Run:
    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.steers: queue.SimpleQueue[str] = queue.SimpleQueue()


def toy_loop(text: str, run: Run) -> Iterator[tuple[str, dict]]:
    """Think, call a pretend tool, then answer word by word: cancellable and steerable."""
    yield "stage_start", {"model": "toy", "round": 1}
    yield "reasoning_delta", {"delta": "Let me count the words first."}
    call = {"id": "call_1", "name": "count_words", "round": 1, "arguments": {"text": text}}
    yield "tool_call_start", call
    count = str(len(text.split()))
    result = {"success": True, "durationMs": 0, "resultPreview": count}
    yield "tool_call_result", {"id": "call_1", "name": "count_words", **result}
    yield "completion", {"status": "executing", "reason": "tool_calls", "round": 1}
    yield "stage_start", {"model": "toy", "round": 2}
    words = f"You wrote {count} words: {text}".split()
    while words:
        time.sleep(WORD_DELAY_S)
        if run.cancelled.is_set():
            yield "completion", {"status": "cancelled", "reason": "cancelled", "round": 2}
            return
        while not run.steers.empty():
            steer = run.steers.get()
            yield "steer", {"content": steer, "round": 2}
            words = f"— all right: {steer}".split()  # the rest of the answer follows the steer
        yield "content_delta", {"delta": words.pop(0) + (" " if words else "")}
    yield "completion", {"status": "completed", "reason": "stop", "round": 2}


class Child:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()  # whole lines, even with several runs writing at once
        self.runs: dict[str, Run] = {}

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            self.out.flush()

    def stream(self, run_id: str, text: str, run: Run) -> None:
        for kind, data in toy_loop(text, run):
            params = {"run_id": run_id, "kind": kind, "data": data}
            self.send({"method": "run.event", "params": params})
        del self.runs[run_id]

    def handle(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params") or {}
        run = self.runs.get(params.get("run_id"))
        if method == "run.start":
            self.runs[params["run_id"]] = run = Run()
            self.send({"id": message["id"], "result": None})
            args = (params["run_id"], params["input"], run)
            threading.Thread(target=self.stream, args=args, daemon=True).start()
        elif method == "run.cancel" and run is not None:
            run.cancelled.set()
        elif method == "run.steer" and run is not None:
            run.steers.put(params["content"])
        elif "id" in message:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            self.send({"id": message["id"], "error": error})
        # Other notifications (for runs already over, run.respond: this loop asks nothing) drop.


if __name__ == "__main__":
    child = Child(sys.stdout)
    for line in sys.stdin:
        if line.strip():
            child.handle(json.loads(line))
