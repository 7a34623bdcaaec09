"""The plain-Python example loops as real processes: started, and spoken to in their own
HTTP (NDJSON) protocol, for the tests here."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
import msgspec

from loopgate.contracts import LoopEvent
from loopgate.contracts.loop import LoopRequest
from tests.integrations.fake_context import as_event, check_stream

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def request(run_id: str, input: str) -> bytes:
    return msgspec.json.encode(LoopRequest(run_id=run_id, thread_id="thread_1", input=input))


def lines_of(stream: IO[str]) -> tuple[queue.Queue[str], threading.Thread]:
    """The lines a process writes, read in the background so it never blocks on a full pipe."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return lines, thread


# --- HTTP ----------------------------------------------------------------------------------------


class HttpLoop:
    def __init__(self, url: str, log: queue.Queue[str]) -> None:
        self.url = url
        self.commands_url = url.rstrip("/") + "/commands"
        self.log = log
        self.client = httpx.Client(timeout=10)

    def command(self, body: dict[str, Any]) -> int:
        return self.client.post(self.commands_url, json=body).status_code

    def run(
        self, run_id: str, input: str, on_event: Callable[[LoopEvent], None] | None = None
    ) -> list[LoopEvent]:
        events: list[LoopEvent] = []
        headers = {"content-type": "application/json", "accept": "application/x-ndjson"}
        body = request(run_id, input)
        with self.client.stream("POST", self.url, content=body, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/x-ndjson"
            for line in response.iter_lines():
                if line.strip():
                    events.append(as_event(json.loads(line)))
                    if on_event is not None:
                        on_event(events[-1])
        check_stream(events)
        return events

    def wait_for_log(self, wanted: str) -> None:
        while self.log.get(timeout=10) != wanted:
            pass


@contextmanager
def started_http_loop() -> Iterator[HttpLoop]:
    """examples/plain_http_loop.py on a free port, until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "plain_http_loop.py"), "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    log, pump = lines_of(proc.stderr)
    try:
        ready = proc.stdout.readline()  # printed once the socket listens
        assert ready.startswith("listening on http://127.0.0.1:"), ready
        loop = HttpLoop(ready.split()[-1], log)
        yield loop
        loop.client.close()
    finally:
        proc.terminate()
        proc.wait(10)
        pump.join(10)  # it has read to the end; now the pipes can close
        proc.stdout.close()
        proc.stderr.close()
