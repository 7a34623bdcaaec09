"""``loopgate run`` with a person at the terminal: a real pseudo-terminal as the child's own.

The child gets the pty slave as stdin, stdout and stderr, in a new session whose controlling
terminal it is (``TIOCSCTTY``), so ``/dev/tty`` and Ctrl-C behave as in a terminal window.
The test reads the master until the output it waits for appears; it never sleeps.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reference.loop_support import loopgate_run as loopgate

ERASE = "\r\x1b[K"
TIMEOUT_S = 30.0


def _become_terminal_owner() -> None:
    """In the child, after setsid: its stderr (the pty slave) becomes its controlling terminal."""
    fcntl.ioctl(2, termios.TIOCSCTTY, 0)


class Pty:
    """``loopgate run ARGS`` on a pseudo-terminal; ``expect`` reads until a pattern shows."""

    def __init__(
        self,
        *args: str,
        cwd: Path,
        stdin: str | None = None,
        stdout_pipe: bool = False,
        controlling: bool = True,
    ) -> None:
        self.master, slave = os.openpty()
        # A real window size: the spinner clips its line to it.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loopgate", "run", *args],
            cwd=cwd,
            stdin=subprocess.PIPE if stdin is not None else slave,
            stdout=subprocess.PIPE if stdout_pipe else slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_become_terminal_owner if controlling else None,
        )
        os.close(slave)
        if stdin is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(stdin.encode())
            self.proc.stdin.close()
        self.out = ""
        self.pos = 0  # where the next expect starts looking
        self._raw = b""
        self.eof = False

    def _read(self, deadline: float) -> None:
        ready, _, _ = select.select([self.master], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return
        try:
            chunk = os.read(self.master, 65536)
        except OSError as exc:  # Linux: EIO once every slave is closed
            if exc.errno != errno.EIO:
                raise
            chunk = b""
        if not chunk:
            self.eof = True
            return
        self._raw += chunk
        self.out = self._raw.decode("utf-8", "replace")

    def expect(self, pattern: str, timeout: float = TIMEOUT_S) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            found = regex.search(self.out, self.pos)
            if found is not None:
                self.pos = found.end()
                return found
            if self.eof or time.monotonic() > deadline:
                pytest.fail(f"no {pattern!r} in the output: {self.out[self.pos :]!r}")
            self._read(deadline)

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, timeout: float = TIMEOUT_S) -> int:
        """Read to the end of the output; the exit code."""
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            self._read(deadline)
        return self.proc.wait(timeout=max(deadline - time.monotonic(), 1))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        os.close(self.master)


@pytest.fixture
def pty_run(tmp_path: Path) -> Any:
    started: list[Pty] = []

    def start(*args: str, **kw: Any) -> Pty:
        term = Pty(*args, cwd=tmp_path, **kw)
        started.append(term)
        return term

    yield start
    for term in started:
        term.close()


def notes(workspace: Path) -> list[Path]:
    folder = workspace / "notes"
    return sorted(folder.iterdir()) if folder.exists() else []


APPROVAL = r"allow write_note\(\{\"name\": \"note-\d+\", \"text\": .*\)\? \[y/N/a=always\] "
WRITE_NOTE = ("write note hello", "--scripted-delay", "0")


# --- approvals ----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [b"y\n", b"yes\n", b"a\n"])
def test_an_approval_answered_yes_writes_the_note(pty_run: Any, tmp_path: Path, answer: bytes):
    term = pty_run(*WRITE_NOTE, "--workspace", str(tmp_path))
    term.expect(APPROVAL)
    term.send(answer)
    term.expect(r"← write_note ok")
    assert term.finish() == 0, term.out
    [note] = notes(tmp_path)
    assert note.read_text().startswith("# write note hello")


@pytest.mark.parametrize(
    "answer", [b"n\n", b"\n", b"\x03", b"\x04"], ids=["n", "enter", "ctrl-c", "eof"]
)
def test_an_approval_answered_no_refuses_the_call(pty_run: Any, tmp_path: Path, answer: bytes):
    term = pty_run(*WRITE_NOTE, "--workspace", str(tmp_path))
    term.expect(APPROVAL)
    term.send(answer)
    term.expect(r"← write_note failed \(\d+ ms\): rejected by the user")
    # The turn goes on (Ctrl-C at a question answers it, it does not cancel the run).
    term.expect(r"— completed \(stop\)")
    assert term.finish() == 0, term.out
    assert notes(tmp_path) == []
    assert "Traceback" not in term.out


def test_approval_is_asked_on_the_terminal_when_the_prompt_came_from_stdin(
    pty_run: Any, tmp_path: Path
):
    term = pty_run("-", "--scripted-delay", "0", "--workspace", str(tmp_path), stdin="write note x")
    term.expect(APPROVAL)
    term.send(b"y\n")
    assert term.finish() == 0, term.out
    assert len(notes(tmp_path)) == 1


def test_yes_and_no_decide_without_asking(pty_run: Any, tmp_path: Path):
    term = pty_run(*WRITE_NOTE, "--workspace", str(tmp_path), "--no")
    term.expect(r"rejected by the user")
    assert term.finish() == 0
    assert "allow write_note" not in term.out and notes(tmp_path) == []
    term = pty_run(*WRITE_NOTE, "--workspace", str(tmp_path), "--yes")
    term.expect(r"← write_note ok")
    assert term.finish() == 0
    assert "allow write_note" not in term.out and len(notes(tmp_path)) == 1


def test_yes_and_no_without_a_terminal(tmp_path: Path):
    refused = loopgate(*WRITE_NOTE, "--workspace", str(tmp_path), "--no", cwd=tmp_path)
    assert refused.returncode == 0 and refused.stderr == ""
    assert "rejected by the user" in refused.stdout and notes(tmp_path) == []
    allowed = loopgate(*WRITE_NOTE, "--workspace", str(tmp_path), "--yes", cwd=tmp_path)
    assert allowed.returncode == 0 and allowed.stderr == ""
    assert "← write_note ok" in allowed.stdout and len(notes(tmp_path)) == 1


def test_yes_and_no_together_are_a_usage_error(tmp_path: Path):
    proc = loopgate(*WRITE_NOTE, "--yes", "--no", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "not allowed with argument" in proc.stderr and "Traceback" not in proc.stderr


def test_without_a_terminal_to_ask_the_call_is_refused_naming_yes(tmp_path: Path):
    proc = loopgate(*WRITE_NOTE, "--workspace", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0
    assert (
        proc.stderr == "loopgate run: write_note needs approval and was refused; --yes allows it\n"
    )
    assert notes(tmp_path) == []


def test_a_terminal_that_is_not_the_controlling_one_cannot_answer(pty_run: Any, tmp_path: Path):
    """stderr on a terminal is not enough: the answer comes from /dev/tty, and there is none."""
    term = pty_run(*WRITE_NOTE, "--workspace", str(tmp_path), controlling=False)
    term.expect(r"write_note needs approval and was refused; --yes allows it")
    assert term.finish() == 0
    assert notes(tmp_path) == []


def test_json_asks_on_the_terminal_never_on_stdout(pty_run: Any, tmp_path: Path):
    """--json, stdout a pipe: the question goes to the terminal (stderr), the answer comes from
    it, and stdout holds only envelopes."""
    term = pty_run(*WRITE_NOTE, "--json", "--workspace", str(tmp_path), stdout_pipe=True)
    term.expect(APPROVAL)
    term.send(b"y\n")
    assert term.finish() == 0, term.out
    assert term.proc.stdout is not None
    lines = term.proc.stdout.read().decode().splitlines()
    assert lines and all(line.startswith('{"run_id"') for line in lines)
    assert len(notes(tmp_path)) == 1


# --- ask_user -----------------------------------------------------------------------------


def test_ask_user_answered_runs_a_follow_up_turn(pty_run: Any, tmp_path: Path):
    term = pty_run("ask user", "--scripted-delay", "0")
    term.expect(r"— waiting_user \(ask_user\)")
    term.expect(r"which option do you prefer, A or B\?\r?\nyour answer \(empty ends the run\): ")
    term.send("B, the blue one ☕\n".encode())
    term.expect(r"you said: B, the blue one ☕\. Continuing with that\.")
    term.expect(r"— completed \(stop\)")
    assert term.finish() == 0, term.out


def test_ask_user_left_unanswered_ends_waiting(pty_run: Any, tmp_path: Path):
    term = pty_run("ask user", "--scripted-delay", "0")
    term.expect(r"your answer \(empty ends the run\): ")
    term.send(b"\n")
    assert term.finish() == 0, term.out
    assert "you said" not in term.out


def test_ctrl_c_at_ask_users_question_ends_the_run_cancelled(pty_run: Any, tmp_path: Path):
    term = pty_run("ask user", "--scripted-delay", "0")
    term.expect(r"your answer \(empty ends the run\): ")
    term.send(b"\x03")
    assert term.finish() == 130, term.out
    assert "you said" not in term.out and "Traceback" not in term.out


def test_ask_user_without_a_terminal_ends_and_says_why(tmp_path: Path):
    proc = loopgate("ask user", "--scripted-delay", "0", cwd=tmp_path)
    assert proc.returncode == 0
    assert "— waiting_user (ask_user)" in proc.stdout
    assert proc.stderr == (
        "loopgate run: the model asked a question (ask_user) that only an interactive "
        "terminal can answer\n"
    )


# --- the spinner --------------------------------------------------------------------------

SPINNER = r"\r[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] sleep running · (\d+\.\d) s · Ctrl-C cancels\x1b\[K"


def test_a_long_tool_call_shows_a_spinner_until_ctrl_c(pty_run: Any):
    term = pty_run("slow tool", "--scripted-delay", "0")
    term.expect(r"→ sleep\(")
    first = term.expect(SPINNER)
    assert float(first.group(1)) >= 1.0
    # Redrawn in place: a later frame with a larger elapsed time, no line break in between.
    later = term.expect(r"[\s\S]*?" + SPINNER)
    assert float(later.group(1)) > float(first.group(1))
    assert "\n" not in term.out[first.start() : later.end()]
    term.send(b"\x03")
    term.expect(r"— cancelled \(cancelled\)")
    assert term.finish() == 130, term.out
    last_frame = list(re.finditer(SPINNER, term.out))[-1]
    after = term.out[last_frame.end() :]
    assert ERASE in after and after.index(ERASE) < after.index("— cancelled")
    assert "Traceback" not in term.out


def test_a_tool_call_that_ends_erases_its_spinner(pty_run: Any):
    term = pty_run("slow tool", "--scripted-delay", "0", "--config", "tool_timeout_ms=2000")
    term.expect(SPINNER)
    result = term.expect(r"← sleep failed")
    assert term.finish() in (0, 1), term.out
    before = term.out[: result.start()]
    last_frame = list(re.finditer(SPINNER, before))[-1]
    assert ERASE in before[last_frame.end() :]


def test_no_spinner_when_stderr_is_not_a_terminal(tmp_path: Path):
    # The call runs 2 s (its timeout), past the second after which a terminal shows it.
    proc = loopgate(
        "slow tool", "--scripted-delay", "0", "--config", "tool_timeout_ms=2000", cwd=tmp_path
    )
    assert "← sleep failed" in proc.stdout
    assert proc.stderr == ""
