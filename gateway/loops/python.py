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
from typing import Any

import anyio

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.loop import AgentLoop, Emit, LoopFault, RunContext
from loopgate.gateway.loops.context import GatewayRunContext
from loopgate.gateway.loops.source import is_terminal
from loopgate.gateway.user_modules import import_user_module, user_attribute

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


def python_loop(target: Any, name: str) -> AgentLoop:
    if _is_agent_loop(target):
        return target  # type: ignore[no-any-return]
    if not callable(target):
        raise ValueError(f"{name} is not a loop: expected an async generator function")
    if _arity(target) == 0:
        made = target()
        if inspect.isawaitable(made):
            raise ValueError(f"{name}: a loop factory must be a plain function, not async")
        return python_loop(made, name)
    return GeneratorLoop(target, name)


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

    def __init__(self, fn: PerRun, name: str) -> None:
        self.fn = fn
        self.name = f"python:{name}"

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def open(self, ctx: RunContext) -> GeneratorRun:
        assert isinstance(ctx, GatewayRunContext)
        return GeneratorRun(self.fn, ctx)


class GeneratorRun:
    def __init__(self, fn: PerRun, ctx: GatewayRunContext) -> None:
        self.fn = fn
        self.ctx = ctx

    async def run(self, emit: Emit) -> None:
        events = self.fn(self.ctx)
        if inspect.isawaitable(events):
            events = await events
        if not isinstance(events, AsyncIterable):
            raise LoopFault("loop_error", "the loop did not return an async iterable of events")
        count = 0
        try:
            async for item in events:
                count += 1
                kind, data = _parts(item, count)
                emit(kind, data)
                if is_terminal(kind, data):
                    return
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                # Shielded: the run's own scope may be cancelled (a timeout), and the generator
                # still deserves to run its finally blocks.
                with anyio.CancelScope(shield=True), anyio.move_on_after(ACLOSE_TIMEOUT_S):
                    await aclose()

    def cancel(self) -> None:
        return None  # the loop reads ctx.cancelled, which the gateway has set

    async def steer(self, content: str) -> str | None:
        return self.ctx.queue_steer(content)


def _parts(item: Any, number: int) -> tuple[Any, Any]:
    if isinstance(item, dict):
        return item.get("kind"), item.get("data", {})
    if isinstance(item, LoopEvent):
        return item.kind, item.data
    raise LoopFault(
        "loop_invalid_event",
        f"event {number} is not an object with a string kind (got {type(item).__name__})",
    )
