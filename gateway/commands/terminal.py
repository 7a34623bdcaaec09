"""The person at the terminal during ``loopgate run``: approvals, answers, a tool-call spinner.

Questions go to stderr and answers are read from the controlling terminal (``/dev/tty``): stdout
stays the run's output, and a prompt piped in on stdin (``run -``) does not swallow the answers.
Nothing here reads or draws unless stderr is a terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import unicodedata
from collections.abc import Callable
from typing import IO, Any, Literal

import anyio

from ...contracts.messages import Message, ToolCall
from ...contracts.parts import text_of
from ..reference.types import PermissionDecision

ApprovalPolicy = Literal["ask", "yes", "no"]

SPIN_AFTER_S = 1.0  # a tool call quicker than this never shows the spinner
FRAME_S = 0.1
FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
ERASE_LINE = "\r\x1b[K"
ARGS_SHOWN = 200  # characters of a call's arguments in an approval question
MAX_ANSWERS = 10  # follow-up turns after ask_user, so a model that keeps asking still ends


class Terminal:
    """stderr when it is a terminal, and the controlling terminal to read answers from."""

    def __init__(self, err: IO[str], tty_fd: int | None) -> None:
        self.err = err
        self.tty_fd = tty_fd
        self.asking = False
        # Set when a question ends, so time spent waiting for the person is not a tool's.
        self.answered_at = 0.0
        self.interrupted = False  # the last question ended with Ctrl-C (or a signal)
        self._question: anyio.CancelScope | None = None
        self._lock = anyio.Lock()
        self._shown = False

    @classmethod
    def open(cls, err: IO[str]) -> Terminal | None:
        """None when ``err`` is not a terminal; without a controlling terminal it cannot ask."""
        try:
            if not err.isatty():
                return None
        except (OSError, ValueError):
            return None
        try:
            # O_NOCTTY: reading answers must never make this process adopt a terminal.
            fd: int | None = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            fd = None
        return cls(err, fd)

    @property
    def can_ask(self) -> bool:
        return self.tty_fd is not None

    def close(self) -> None:
        self.clear()
        if self.tty_fd is not None:
            os.close(self.tty_fd)
            self.tty_fd = None

    # --- the status line ----------------------------------------------------------------------

    def show(self, text: str) -> None:
        """Draw ``text`` over the status line; clipped, since a wrapped line cannot be redrawn."""
        self.err.write("\r" + clip(text, _width(self.err) - 1) + "\x1b[K")
        self.err.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._shown = False
            self.err.write(ERASE_LINE)
            self.err.flush()

    # --- questions ----------------------------------------------------------------------------

    async def ask(self, question: str) -> str | None:
        """One line typed at the terminal; None for none (end of input, Ctrl-C, no terminal)."""
        if self.tty_fd is None:
            return None
        import termios  # here: Windows has none, and no /dev/tty either, so never gets here

        async with self._lock:
            self.clear()
            self.asking = True
            self.interrupted = False
            line: str | None = None
            try:
                # Keys pressed while the run streamed are not an answer to a question not yet shown.
                with contextlib.suppress(termios.error):
                    termios.tcflush(self.tty_fd, termios.TCIFLUSH)
                self.err.write(question)
                self.err.flush()
                with anyio.CancelScope() as scope:
                    self._question = scope
                    line = await _read_line(self.tty_fd)
                if scope.cancelled_caught:
                    self.interrupted = True
            finally:
                self._question = None
                self.asking = False
                self.answered_at = time.monotonic()
            if line is None:
                self.err.write("\n")  # the cursor still sits after the question
                self.err.flush()
            return line

    def interrupt(self) -> bool:
        """Ctrl-C: the open question, if any, ends unanswered. True = there was one."""
        if self._question is None:
            return False
        self._question.cancel()
        return True


async def _read_line(fd: int) -> str | None:
    """The next line from a terminal in canonical mode; None at end of input or on an error."""
    buf = b""
    while b"\n" not in buf:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        except OSError:
            return None  # the terminal went away (EIO after a hang-up)
        if not chunk:
            # Ctrl-D: at the start of a line it is the end of input; after text, that text.
            return buf.decode("utf-8", "replace") if buf else None
        buf += chunk
    return buf.split(b"\n", 1)[0].decode("utf-8", "replace")


class TerminalApprovals:
    """How ``loopgate run`` answers a run's permission requests: ``--yes``, ``--no``, or ask at
    the terminal."""

    def __init__(self, policy: ApprovalPolicy, terminal: Terminal | None) -> None:
        self.policy = policy
        self.terminal = terminal
        self.always: set[str] = set()  # tool names answered "a" (always, for this run)

    async def decide(self, call: ToolCall) -> PermissionDecision:
        if self.policy == "yes" or call.name in self.always:
            return "allow"
        if self.policy == "no":
            return "reject"
        if self.terminal is None or not self.terminal.can_ask:
            # Nobody to ask: say why the tool was refused and how to allow it.
            if self.terminal is not None:
                self.terminal.clear()
            print(
                f"loopgate run: {call.name} needs approval and was refused; --yes allows it",
                file=sys.stderr,
            )
            return "reject"
        args = clip(json.dumps(call.arguments, ensure_ascii=False), ARGS_SHOWN)
        answer = await self.terminal.ask(
            f"loopgate run: allow {_printable(call.name)}({_printable(args)})? [y/N/a=always] "
        )
        choice = (answer or "").strip().lower()
        if choice in ("a", "always"):
            self.always.add(call.name)
            return "allow"
        return "allow" if choice in ("y", "yes") else "reject"


class ToolSpinner:
    """While a tool call has run over a second without its result: one line saying which and
    for how long, redrawn in place on the terminal and erased before anything else is printed."""

    def __init__(self, terminal: Terminal, clock: Callable[[], float] = time.monotonic) -> None:
        self.terminal = terminal
        self.clock = clock
        self.running: dict[str, tuple[str, float]] = {}  # call id → (tool name, started)
        self.frame = 0

    def observe(self, kind: str, data: dict[str, Any]) -> None:
        """Called with each event before it is printed: the line gives way to the output."""
        self.terminal.clear()
        if kind == "tool_call_start":
            self.running[str(data.get("id"))] = (str(data.get("name")), self.clock())
        elif kind in ("tool_call_result", "tool_error"):
            self.running.pop(str(data.get("id")), None)
        elif kind == "completion" and data.get("status") != "executing":
            self.running.clear()

    def line(self) -> str | None:
        """The spinner's text now, or None when nothing has run long enough to show."""
        if not self.running or self.terminal.asking:
            return None
        name, started = min(self.running.values(), key=lambda running: running[1])
        elapsed = self.clock() - max(started, self.terminal.answered_at)
        if elapsed < SPIN_AFTER_S:
            return None
        others = len(self.running) - 1
        more = f" (+{others} more)" if others else ""
        spin = FRAMES[self.frame % len(FRAMES)]
        return f"{spin} {_printable(name)}{more} running · {elapsed:.1f} s · Ctrl-C cancels"

    async def run(self) -> None:
        """Redraw about ten times a second until cancelled; the line is erased on the way out."""
        try:
            while True:
                await anyio.sleep(FRAME_S)
                text = self.line()
                if text is None:
                    self.terminal.clear()
                else:
                    self.frame += 1
                    self.terminal.show(text)
        finally:
            self.terminal.clear()


# --- ask_user: the question a turn ended on, and its answer -----------------------------------


def asked_question(completion: dict[str, Any] | None, history: list[Message]) -> str | None:
    """The question when the turn ended waiting for the user's answer to ``ask_user``."""
    if completion is None or completion.get("status") != "waiting_user":
        return None
    if completion.get("reason") != "ask_user":
        return None
    call_id = completion.get("toolCallId")
    for message in reversed(history):
        if message.role == "tool" and message.tool_call_id == call_id:
            return text_of(message.content)
    return None


def question_prompt(question: str) -> str:
    return f"{_printable(question)}\nyour answer (empty ends the run): "


# --- text ---------------------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (the last an ellipsis when cut)."""
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _printable(text: str) -> str:
    """``text`` without control characters (a model's escape sequences could redraw the
    screen around a question), line breaks kept."""
    return "".join(
        "?" if unicodedata.category(ch) == "Cc" and ch not in "\n\t" else ch for ch in text
    )


def _width(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80
