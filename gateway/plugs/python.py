"""An in-process Python loop: ``--loop package.module:attr``.

``attr`` is one of
- an async generator function taking the run context (``async def loop(ctx): yield {...}``);
- any callable taking the run context and returning an async iterable of events;
- a factory taking no arguments that returns one of the above (called once, at start);
- an object implementing :class:`contracts.loop.AgentLoop` itself.

Events are dicts ``{"kind": ..., "data": {...}}`` or :class:`contracts.envelope.LoopEvent`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Callable
from types import FrameType
from typing import Any

import anyio

from ...contracts.envelope import LoopEvent
from ...contracts.loop import AgentLoop, Emit, LoopFault, LoopRun, RunContext
from ...contracts.parts import parse_kinds
from ..settings import LoopRunner
from ..user_modules import import_user_module, user_attribute
from .context import GatewayRunContext
from .source import is_terminal

PerRun = Callable[[RunContext], Any]
# How long a generator's own clean-up (its ``finally`` blocks) may take once the run is over.
ACLOSE_TIMEOUT_S = 5.0


def load_object(spec: str) -> Any:
    """``package.module:attr`` (``attr`` may be dotted), importable from the current directory."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--loop must look like package.module:attr, got {spec!r}")
    flag = f"--loop {spec}"
    return user_attribute(import_user_module(module_name, flag), attr, flag)


def python_loop(target: Any, name: str, runner: LoopRunner = "event_loop") -> AgentLoop:
    """``runner``: where the loop's generators run, the gateway's event loop or a thread each
    (``loop_runner``, docs/loops.md#a-loop-that-blocks)."""
    if _is_agent_loop(target):
        if runner != "event_loop":
            raise ValueError(
                f"{name} is an AgentLoop object: --loop-runner {runner} runs async generator "
                "functions (and factories of them) only"
            )
        return target  # type: ignore[no-any-return]
    if not callable(target):
        raise ValueError(f"{name} is not a loop: expected an async generator function")
    if _arity(target) == 0:
        made = target()
        if inspect.isawaitable(made):
            raise ValueError(f"{name}: a loop factory must be a plain function, not async")
        return python_loop(made, name, runner)
    return GeneratorLoop(target, name, runner)


def _is_agent_loop(target: Any) -> bool:
    return all(hasattr(target, attr) for attr in ("open", "start", "aclose", "untrusted"))


def _arity(fn: Callable[..., Any]) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in positional and p.default is p.empty)


class GeneratorLoop:
    """Implements :class:`contracts.loop.AgentLoop` for a per-run async generator function."""

    untrusted = True
    # Whether another instance may resume its runs (--loop-resumable): not unless it says.
    resumable = False

    def __init__(self, fn: PerRun, name: str, runner: LoopRunner = "event_loop") -> None:
        self.fn = fn
        self.name = f"python:{name}"
        self.runner = runner
        # What the function declares it takes (``loop.accepts = {"image", "file"}``), checked
        # now: a typo is the operator's start-up error, not every client's refusal.
        declared = getattr(fn, "accepts", None)
        self.accepts: frozenset[str] | None = (
            frozenset() if declared is None else parse_kinds(declared)
        )

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def open(self, ctx: RunContext) -> LoopRun:
        assert isinstance(ctx, GatewayRunContext)
        if self.runner == "thread":
            # Imported here: the worker thread's machinery is for the loops that ask for it.
            from .threaded import ThreadedRun

            return ThreadedRun(self.fn, ctx)
        return GeneratorRun(self.fn, ctx)


class GeneratorRun:
    def __init__(self, fn: PerRun, ctx: GatewayRunContext) -> None:
        self.fn = fn
        self.ctx = ctx

    async def run(self, emit: Emit) -> None:
        await drive(self.fn, self.ctx, EventTaker(emit))

    def cancel(self) -> None:
        return None  # the loop reads ctx.cancelled, which the gateway has set

    async def steer(self, content: str) -> str | None:
        return self.ctx.queue_steer(content)


class EventTaker:
    """Hands a generator's items to the gateway as events; True once the run's last is in."""

    __slots__ = ("count", "emit")

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.count = 0

    def __call__(self, item: Any) -> bool:
        self.count += 1
        kind, data = item_parts(item, self.count)
        self.emit(kind, data)
        return is_terminal(kind, data)


async def drive(fn: PerRun, ctx: RunContext, take: Callable[[Any], bool]) -> None:
    """One run of a per-run generator function: its items to ``take`` until the last.

    The stall watchdog (gateway/stall_watchdog.py) finds this function's frame on a blocked
    event loop's stack, and names the run from its ``ctx``."""
    events = fn(ctx)
    if inspect.isawaitable(events):
        events = await events
    if not isinstance(events, AsyncIterable):
        raise LoopFault("loop_error", "the loop did not return an async iterable of events")
    try:
        async for item in events:
            if take(item):
                return
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            # Shielded: the run's own scope may be cancelled (a timeout), and the generator
            # still deserves to run its finally blocks.
            with anyio.CancelScope(shield=True), anyio.move_on_after(ACLOSE_TIMEOUT_S):
                await aclose()


def stepping_run(frame: FrameType) -> str | None:
    """The run whose Python loop this frame is driving, if it is :func:`drive`'s."""
    if frame.f_code is not _DRIVE_CODE:
        return None
    ctx = frame.f_locals.get("ctx")
    run_id = getattr(ctx, "run_id", None)
    return run_id if isinstance(run_id, str) else None


_DRIVE_CODE = drive.__code__


def item_parts(item: Any, number: int) -> tuple[Any, Any]:
    if isinstance(item, dict):
        return item.get("kind"), item.get("data", {})
    if isinstance(item, LoopEvent):
        return item.kind, item.data
    raise LoopFault(
        "loop_invalid_event",
        f"event {number} is not an object with a string kind (got {type(item).__name__})",
    )
