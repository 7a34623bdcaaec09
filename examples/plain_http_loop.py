"""A toy agent loop behind HTTP, in plain Python: the standard library only, nothing from loopgate.

    python examples/plain_http_loop.py 8001
    loopgate serve --loop-url http://127.0.0.1:8001/

loopgate POSTs each run's request as JSON; the answer streams one {"kind", "data"} object per
line, ending with a terminal completion. While a run streams, loopgate POSTs its cancel and
steer commands to /commands. Closing the connection cancels too. Port 0 picks a free port.
"""

import json
import queue
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class Server(ThreadingHTTPServer):
    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.runs: dict[str, Run] = {}  # by run id: a run's stream and its commands share it


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        runs = self.server.runs
        if self.path.rstrip("/").endswith("/commands"):
            run = runs.get(body.get("run_id"))
            if run is not None and body.get("type") == "cancel":
                run.cancelled.set()
            elif run is not None and body.get("type") == "steer":
                run.steers.put(body["content"])
            else:  # an unknown run, or a command this loop does not take (respond)
                return self.send_error(404)
            self.send_response(204)
            return self.end_headers()
        runs[body["run_id"]] = run = Run()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        try:
            for kind, data in toy_loop(body["input"], run):
                self.wfile.write(json.dumps({"kind": kind, "data": data}).encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            del runs[body["run_id"]]  # gone before we say so: later commands find no run
            print(f"run {body['run_id']}: connection closed, run stopped", file=sys.stderr)
            return
        del runs[body["run_id"]]


if __name__ == "__main__":
    server = Server(int(sys.argv[1]))
    print(f"listening on http://127.0.0.1:{server.server_port}/", flush=True)
    server.serve_forever()
