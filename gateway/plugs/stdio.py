"""A loop as a long-lived child process speaking JSON-RPC 2.0 on stdio: ``--loop-cmd "CMD"``.

One child serves every run, multiplexed by run id (seed 001's sidecar shape), one message per
line. The gateway sends ``run.start`` (a request; its params are the LoopRequest, whose
``principal`` says who asked, never with the credential) and the
notifications ``run.cancel``, ``run.steer`` and ``run.respond``; the child sends ``run.event``
notifications ``{run_id, kind, data}``. The child's stderr is relayed to the gateway's within
bounds (gateway/plugs/stderr.py).

A child that exits, or writes anything but JSON-RPC on stdout, ends its open runs with
``completion{failed}`` naming the cause and is started again with back-off. A line over
``max_line_bytes`` is read in bounded chunks and discarded: it ends the run it names
(``loop_invalid_event``), and the child, whose stream is in step again at the next line, goes on.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import shlex
import shutil
import subprocess
import time
from typing import Any

import anyio
import anyio.abc
import msgspec

from ...contracts.loop import Emit, LoopFault, RunContext, TracksReaching
from ...contracts.ports import LimitReached, RunFinished
from .source import is_terminal
from .stderr import StderrBounds, StderrWriter, capacity, relay_stderr
from .wire import (
    BoundedLines,
    Cut,
    decode,
    encode,
    encode_request,
    event_parts,
    line_too_long,
    relay_permission,
)

log = logging.getLogger("loopgate.loop.stdio")

READ_CHUNK = 1 << 16
FIRST_BACKOFF_S = 0.5
STABLE_AFTER_S = 60.0  # a child that ran this long starts its back-off afresh
STOP_WAIT_S = 2.0
MAX_PENDING_ASKS = 16
METHOD_NOT_FOUND = -32601
# Whose line an over-long one was: the first `"run_id": "…"` in what was kept of it that names
# an open run (the child's serializer may put `data`, and ids inside it, first).
RUN_ID = re.compile(rb'"run_id"\s*:\s*"([^"\\]{1,256})"')


class StdioLoop:
    """Implements :class:`contracts.loop.AgentLoop` with a supervised child process."""

    untrusted = True
    # Whether another instance may resume its runs (--loop-resumable): not unless it says.
    resumable = False

    def __init__(
        self,
        command: str,
        *,
        connect_timeout_s: float,
        max_line_bytes: int,
        restart_max_s: float,
        stderr: StderrBounds,
    ) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("--loop-cmd needs a command")
        # Said at start-up, not as a failed first run: a typo in the program's name.
        if shutil.which(self.argv[0]) is None:
            raise ValueError(
                f"--loop-cmd: no program {self.argv[0]!r} (not found or not executable)"
            )
        self.name = f"stdio:{command}"
        self.connect_timeout_s = connect_timeout_s
        self.max_line_bytes = max_line_bytes
        self.restart_max_s = restart_max_s
        self.stderr = stderr
        self._stderr_writer: StderrWriter | None = None
        self.runs: dict[str, StdioRun] = {}
        self.ready = anyio.Event()
        self._process: anyio.abc.Process | None = None
        self._starts: dict[int, StdioRun] = {}
        self._ids = itertools.count(1)
        self._write_lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False

    # --- lifecycle (entered and left by the same task: the hub's) ---------------------------

    async def start(self) -> None:
        self._stderr_writer = StderrWriter(capacity(self.stderr))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._supervise)

    async def aclose(self) -> None:
        self._closing = True
        process = self._process
        if process is not None:
            with anyio.CancelScope(shield=True):
                await _stop(process)
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
        if self._stderr_writer is not None:
            with anyio.CancelScope(shield=True):
                await self._stderr_writer.aclose(STOP_WAIT_S)

    def open(self, ctx: RunContext) -> StdioRun:
        return StdioRun(self, ctx)

    async def _supervise(self) -> None:
        backoff = FIRST_BACKOFF_S
        while not self._closing:
            began = time.monotonic()
            cause = await self._one_child()
            for run in list(self.runs.values()):
                run.fail(LoopFault("loop_exited", cause))
            if self._closing:
                return
            if time.monotonic() - began > STABLE_AFTER_S:
                backoff = FIRST_BACKOFF_S
            log.warning("%s; starting it again in %g s", cause, backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self.restart_max_s)

    async def _one_child(self) -> str:
        """Run one child until it exits or breaks the protocol; returns what happened."""
        try:
            process = await anyio.open_process(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            log.error("cannot start the loop process %s: %s", self.argv, exc)
            return "the loop process could not be started"
        assert process.stderr is not None and self._stderr_writer is not None
        self._process = process
        self.ready.set()
        cause: str | None = None  # bound for type checkers: the group's scope may end _read
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay_stderr, process.stderr, self.stderr, self._stderr_writer.offer)
            try:
                cause = await self._read(process)
            finally:
                self.ready = anyio.Event()
                self._process = None
                self._starts.clear()
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                # Its last words, unless something it started holds its stderr open.
                tg.cancel_scope.deadline = anyio.current_time() + STOP_WAIT_S
        return cause or f"the loop process exited (code {process.returncode})"

    async def _read(self, process: anyio.abc.Process) -> str | None:
        assert process.stdout is not None
        lines = BoundedLines(self.max_line_bytes)
        while True:
            try:
                chunk = await process.stdout.receive(READ_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None
            try:
                for line in lines.feed(chunk):
                    if isinstance(line, Cut):
                        self._too_long(line)
                    elif line.strip():
                        await self._dispatch(line)
            except (LoopFault, ValueError) as exc:
                log.error("the loop process broke the protocol: %s", exc)
                return "the loop process wrote something that is not JSON-RPC on stdout"

    def _too_long(self, head: bytes) -> None:
        """A line over the limit ends the run it names (a finished one: none); one naming no
        run ends every open run, as any of them may have lost an event. The rest of the line
        is discarded as it arrives; the child goes on."""
        fault = line_too_long("the loop process", self.max_line_bytes)
        named = [m.group(1).decode(errors="replace") for m in RUN_ID.finditer(head)]
        if named:
            runs = [self.runs[i] for i in named if i in self.runs][:1]
            ends = f"run {runs[0].ctx.run_id}" if runs else "no open run"
        else:
            runs = list(self.runs.values())
            ends = f"all {len(runs)} open runs (it names none)"
        log.warning(
            "the loop process sent a line longer than max_line_bytes (%d); discarded, it ends %s",
            self.max_line_bytes,
            ends,
        )
        for run in runs:
            run.fail(fault)

    async def _dispatch(self, line: bytes) -> None:
        message = decode(line)
        if not isinstance(message, dict):
            raise ValueError(f"a line is a JSON {type(message).__name__}, not an object")
        method = message.get("method")
        if method == "run.event":
            params = message.get("params")
            if not isinstance(params, dict):
                raise ValueError("run.event params must be an object")
            run = self.runs.get(params.get("run_id"))  # type: ignore[arg-type]
            if run is not None:
                run.deliver(params)
            return
        if method is None:
            # A response: to our run.start.
            run = self._starts.pop(message.get("id"), None)  # type: ignore[arg-type]
            error = message.get("error")
            if run is not None and error is not None:
                code = error.get("code") if isinstance(error, dict) else None
                log.warning("the loop refused run %s: %r", run.ctx.run_id, error)
                run.fail(LoopFault("loop_error", f"the loop refused the run (error {code})"))
            return
        if "id" in message:
            # The child asked us something; we serve no methods.
            await self.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"},
                }
            )

    # --- writing ---------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> bool:
        """Write one message; False if there is no child to take it."""
        process = self._process
        if process is None or process.stdin is None:
            return False
        data = encode(message) + b"\n"
        async with self._write_lock:
            with anyio.move_on_after(self.connect_timeout_s) as timer:
                try:
                    await process.stdin.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return False
        if timer.cancelled_caught:
            log.error("the loop process stopped reading its stdin; restarting it")
            process.kill()
            return False
        return True

    async def begin(self, run: StdioRun) -> bool:
        request_id = next(self._ids)
        self._starts[request_id] = run
        params = encode_request(run.ctx.request)
        return await self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "run.start",
                "params": msgspec.Raw(params),
            }
        )


class StdioRun:
    def __init__(self, loop: StdioLoop, ctx: RunContext) -> None:
        self.loop = loop
        self.ctx = ctx
        self.done = anyio.Event()
        self.fault: LoopFault | None = None
        self.count = 0
        self.emit: Emit | None = None
        self.cancel_requested = anyio.Event()
        self.asks_in, self.asks_out = anyio.create_memory_object_stream[dict[str, Any]](
            MAX_PENDING_ASKS
        )

    async def run(self, emit: Emit) -> None:
        loop = self.loop
        self.emit = emit
        # A child being started again is reached within the connect timeout; the first-event
        # timeout counts from then, not from the run's start.
        reaching = (
            self.ctx.reaching()
            if isinstance(self.ctx, TracksReaching)
            else contextlib.nullcontext()
        )
        with reaching, anyio.move_on_after(loop.connect_timeout_s):
            await loop.ready.wait()
        run_id = self.ctx.run_id
        loop.runs[run_id] = self
        try:
            if not loop.ready.is_set() or not await loop.begin(self):
                raise LoopFault("loop_unavailable", "the loop process is not running")
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._answer_asks, tg)
                tg.start_soon(self._relay_cancel)
                await self.done.wait()
                tg.cancel_scope.cancel()
        finally:
            loop.runs.pop(run_id, None)
        if self.fault is not None:
            raise self.fault

    def deliver(self, params: dict[str, Any]) -> None:
        """One ``run.event`` from the child (called by the reader; never raises)."""
        if self.done.is_set() or self.emit is None:
            return
        self.count += 1
        try:
            kind, data = event_parts(params, self.count)
            if kind == "permission_request":
                try:
                    self.asks_in.send_nowait(data)
                except anyio.WouldBlock:
                    raise LoopFault(
                        "loop_invalid_event",
                        f"more than {MAX_PENDING_ASKS} permission requests are open",
                    ) from None
                return
            self.emit(kind, data)
            if is_terminal(kind, data):
                self.done.set()
        except LoopFault as fault:
            self.fail(fault)
        except (RunFinished, LimitReached):
            self.done.set()

    def fail(self, fault: LoopFault) -> None:
        self.fault = self.fault or fault
        self.done.set()

    async def _answer_asks(self, tg: anyio.abc.TaskGroup) -> None:
        async for data in self.asks_out:
            tg.start_soon(self._ask, data)

    async def _ask(self, data: dict[str, Any]) -> None:
        async def answer(fields: dict[str, Any]) -> None:
            await self.loop.send(_notification("run.respond", run_id=self.ctx.run_id, **fields))

        try:
            await relay_permission(self.ctx, data, answer)
        except LoopFault as fault:
            self.fail(fault)

    async def _relay_cancel(self) -> None:
        await self.cancel_requested.wait()
        await self.loop.send(_notification("run.cancel", run_id=self.ctx.run_id))

    def cancel(self) -> None:
        self.cancel_requested.set()

    async def steer(self, content: str) -> str | None:
        message = _notification("run.steer", run_id=self.ctx.run_id, content=content)
        if await self.loop.send(message):
            return None
        return "the loop process is not running"


def _notification(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def _stop(process: anyio.abc.Process) -> None:
    """End the child: EOF on stdin first (a clean exit), then SIGTERM, then SIGKILL."""
    if process.returncode is None and process.stdin is not None:
        with anyio.move_on_after(STOP_WAIT_S), contextlib.suppress(anyio.BrokenResourceError):
            await process.stdin.aclose()
            await process.wait()
    for stop in (process.terminate, process.kill):
        if process.returncode is not None:
            break
        try:
            stop()
        except ProcessLookupError:
            break
        with anyio.move_on_after(STOP_WAIT_S):
            await process.wait()
