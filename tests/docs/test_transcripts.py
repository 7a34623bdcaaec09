"""The docs' stdio transcripts are what the program answers now.

A transcript is a fenced block of ``→ {…}`` lines (what the client writes to the program's stdin)
and ``← {…}`` lines (what it writes back), ``…`` on a line of its own standing for any number of
messages. Each ``→`` line is written to the real program, as its client would; the ``←`` lines
after it must be the program's next messages, in order, each of the shape shown
(tests/docs/output_shapes.py: ``…`` is any value or the rest of a word, ``"sess_0db8…"`` any
string starting ``sess_``). An id the program made up, shown that way in a ``→`` line, is sent as
the program gave it: the last string it wrote that starts the same.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.docs.output_shapes import ELLIPSIS, mismatch, parse_shape
from tests.docs.test_command_examples import DOCS, base_env, doc_name
from tests.gateway.harness import REPO

# doc → the command its transcript is of
TRANSCRIPTS = {"docs/acp.md": ["loopgate", "acp"]}
# doc → why its transcript is not run
NOT_RUN = {
    "docs/loops.md": (
        "what a stdio loop child reads and writes, not a program of loopgate's; "
        "tests/plugs/ drive real children"
    ),
}
ANSWER_TIMEOUT_S = 60
SHOWN_ID = re.compile(r'"([^"…]*?)[0-9A-Za-z]*…"')


def transcript(markdown: str) -> list[tuple[int, str, str]]:
    """(line number, "→" / "←" / "…", the JSON shown) of the first block that has ``→`` lines."""
    blocks = re.finditer(r"^```[^\n]*\n(.*?)^```", markdown, re.S | re.M)
    for block in blocks:
        lines = block.group(1).splitlines()
        if not any(line.startswith("→ ") for line in lines):
            continue
        first = markdown.count("\n", 0, block.start(1)) + 1
        return [
            (first + index, line[:1], line[2:])
            for index, line in enumerate(lines)
            if line[:2] in ("→ ", "← ") or line.strip() == ELLIPSIS
        ]
    return []


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


class Agent:
    """The program on a pipe: lines in, messages out, each read within a bounded time."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.messages: queue.Queue[bytes] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.said: list[str] = []  # every string the program wrote, newest last

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self.messages.put(line)
        self.messages.put(b"")

    def send(self, shown: str) -> None:
        def made_up(match: re.Match[str]) -> str:
            prefix = match.group(1)
            given = [s for s in self.said if s.startswith(prefix) and len(s) > len(prefix)]
            assert given, f"{match.group()}: the program gave no id starting {prefix!r}"
            return json.dumps(given[-1])

        line = SHOWN_ID.sub(made_up, shown)
        json.loads(line)  # what is sent is JSON: every … was an id the program gave
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> Any:
        try:
            line = self.messages.get(timeout=ANSWER_TIMEOUT_S)
        except queue.Empty:
            pytest.fail(f"no message in {ANSWER_TIMEOUT_S} s")
        assert line, "the program closed its stdout"
        message = json.loads(line)
        self.said.extend(strings(message))
        return message

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(ANSWER_TIMEOUT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def play(doc: str, steps: list[tuple[int, str, str]], agent: Agent) -> None:
    gap = False
    for line, kind, shown in steps:
        if kind == "→":
            agent.send(shown)
        elif kind == ELLIPSIS:
            gap = True
        else:
            shape = parse_shape(shown)
            message = agent.receive()
            while gap and mismatch(shape, message) is not None:
                message = agent.receive()
            problem = mismatch(shape, message)
            assert problem is None, f"{doc}:{line}: {problem}\nreceived: {message}"
            gap = False


def transcript_docs() -> list[Path]:
    return [doc for doc in DOCS if transcript(doc.read_text())]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("doc", [REPO / name for name in TRANSCRIPTS], ids=str)
def test_the_transcript_is_what_the_program_answers(doc: Path, tmp_path: Path) -> None:
    name = doc_name(doc)
    env = base_env(tmp_path)
    program, *args = TRANSCRIPTS[name]
    found = shutil.which(program, path=env["PATH"])
    assert found is not None, f"{program} is not on the PATH"
    agent = Agent([found, *args], tmp_path, env)
    try:
        play(name, transcript(doc.read_text()), agent)
    finally:
        agent.close()


def test_every_transcript_is_run_or_says_why_not() -> None:
    found = {doc_name(doc) for doc in transcript_docs()}
    assert found == set(TRANSCRIPTS) | set(NOT_RUN)
