"""For tests/agents/test_reload.py: a loop module the tests write and edit, the gateway's log
read as it is written, and runs read over HTTP."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import httpx

from tests.gateway.sse_client import envelopes, read_stream

PROBE = "reload_probe"

# An AgentLoop object, so that closing it leaves a mark: its aclose appends ANSWER to CLOSED.
# A run whose input is "hold" answers, then waits to be cancelled and answers again.
PROBE_SOURCE = """\
from pathlib import Path

ANSWER = {answer!r}
CLOSED = Path({closed!r})


class Turn:
    def __init__(self, ctx):
        self.ctx = ctx

    async def run(self, emit):
        emit("content_delta", {{"delta": ANSWER}})
        if self.ctx.input == "hold":
            await self.ctx.wait_cancelled()
            emit("content_delta", {{"delta": " then " + ANSWER}})
        emit("completion", {{"status": "completed", "reason": "stop"}})

    def cancel(self):
        pass

    async def steer(self, content):
        return "this loop takes no steering"


class Probe:
    name = "probe"
    untrusted = True

    async def start(self):
        pass

    async def aclose(self):
        with CLOSED.open("a") as f:
            f.write(ANSWER + "\\n")

    def open(self, ctx):
        return Turn(ctx)


loop = Probe()
"""


def write_probe(directory: Path, answer: str) -> Path:
    """The probe module in ``directory``, answering ``answer``; its closed loops are listed in
    ``directory/closed.txt``."""
    path = directory / f"{PROBE}.py"
    closed = str(directory / "closed.txt")
    path.write_text(PROBE_SOURCE.format(answer=answer, closed=closed), encoding="utf-8")
    return path


def closed_loops(directory: Path) -> list[str]:
    path = directory / "closed.txt"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


class StderrLog:
    """A child process's stderr, read line by line as it comes (the pipe is never left full)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self.stream = proc.stderr
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.stream:
            with self.changed:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.changed.notify_all()

    def wait_for(self, text: str, *, after: int = 0, timeout: float = 10) -> int:
        """The index of the first line from ``after`` on that holds ``text``."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for index in range(after, len(self.lines)):
                    if text in self.lines[index]:
                        return index
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no log line with {text!r}; the log:\n" + self.text())
                self.changed.wait(left)

    def mark(self) -> int:
        """Where lines logged from now on start."""
        with self.changed:
            return len(self.lines)

    def read_to_end(self, timeout: float = 10) -> str:
        """The whole log of a process that has exited."""
        self.reader.join(timeout)
        assert not self.reader.is_alive(), "stderr still open"
        return self.text()

    def text(self) -> str:
        with self.changed:
            return "\n".join(self.lines)


def start(http: httpx.Client, prompt: str, agent: str | None = None) -> str:
    body: dict[str, object] = {"input": prompt}
    if agent is not None:
        body["agent"] = agent
    response = http.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def text_of(base: str, run_id: str) -> str:
    """The text a run answered, read to its end."""
    events = envelopes(read_stream(base, run_id))
    assert events[-1]["kind"] == "completion", events[-1]
    return "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")


def answer(base: str, http: httpx.Client, prompt: str = "hi", agent: str | None = None) -> str:
    return text_of(base, start(http, prompt, agent))
